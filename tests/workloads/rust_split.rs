// Rust as rustc -O builds it (no frame pointers, in our code or in std):
// hot_a and hot_b take 2:1 of the CPU under dispatch -> run -> main, and
// main is entered through std's runtime (lang_start), also without frame
// pointers. Written for Debian's rustc 1.63 (no std::hint::black_box).
//
//   rust_split SECONDS
use std::time::{Duration, Instant};

fn opaque(x: u64) -> u64 {
    unsafe { std::ptr::read_volatile(&x) }
}

fn spin(n: u64) -> u64 {
    let mut x = opaque(1);
    for _ in 0..n {
        x = opaque(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));
    }
    x
}

#[inline(never)]
fn hot_a(n: u64) -> u64 {
    spin(2 * n)
}

#[inline(never)]
fn hot_b(n: u64) -> u64 {
    spin(n)
}

#[inline(never)]
fn dispatch(n: u64) -> u64 {
    let a = hot_a(n);
    let b = hot_b(n);
    opaque(a ^ b)
}

#[inline(never)]
fn run(seconds: f64) -> u64 {
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut sum = 0u64;
    while Instant::now() < end {
        sum = sum.wrapping_add(dispatch(5_000_000));
    }
    opaque(sum)
}

fn main() {
    let seconds: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(10.0);
    println!("done {}", run(seconds) & 1);
}
