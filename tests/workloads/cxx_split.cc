// C++ without frame pointers (g++ -O2 -fomit-frame-pointer): virtual calls,
// a template, std::function and an exception thrown and caught each round.
// Square::area and Circle::area take 2:1 of the CPU under
// apply_all<...> -> run -> main.
//
//   cxx_split SECONDS
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

static volatile uint64_t sink;

static void spin(uint64_t n)
{
    uint64_t x = sink;
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x));
    }
    sink = x;
}

struct Shape {
    virtual ~Shape() = default;
    virtual void area(uint64_t n) const = 0;
};

struct Square : Shape {
    __attribute__((noinline)) void area(uint64_t n) const override { spin(2 * n); }
};

struct Circle : Shape {
    __attribute__((noinline)) void area(uint64_t n) const override { spin(n); }
};

template <typename F>
__attribute__((noinline)) void apply_all(const std::vector<std::unique_ptr<Shape>> &shapes, F &&f)
{
    for (const auto &s : shapes)
        f(*s);
    sink++;
}

__attribute__((noinline)) void checked(uint64_t round)
{
    if (round % 2 == 0)
        throw std::runtime_error("even round");
}

__attribute__((noinline)) void run(double seconds)
{
    std::vector<std::unique_ptr<Shape>> shapes;
    shapes.push_back(std::make_unique<Square>());
    shapes.push_back(std::make_unique<Circle>());
    std::function<void(const Shape &)> each = [](const Shape &s) { s.area(20000000); };
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (uint64_t round = 0; std::chrono::steady_clock::now() < end; round++) {
        apply_all(shapes, each);
        try {
            checked(round);
        } catch (const std::exception &e) {
            sink += e.what()[0];
        }
    }
    sink++;
}

int main(int argc, char **argv)
{
    run(argc > 1 ? std::atof(argv[1]) : 10);
    std::puts("done");
    return 0;
}
