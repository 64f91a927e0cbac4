/* The name of a process run by an interpreter, from its command line: the
 * script, module, jar or main class it runs, as a person would name it,
 * rather than the interpreter (every Python program on a host would
 * otherwise be the one service "python3.11").
 *
 * Pure functions over the text of /proc/PID/cmdline (NUL-separated
 * arguments, perhaps not NUL-terminated, perhaps rewritten by the process:
 * anything may be in it). The rules are in docs/operating.md#service-names.
 */
#ifndef CODEXRAY_AGENT_PROCS_CMDLINE_NAME_H
#define CODEXRAY_AGENT_PROCS_CMDLINE_NAME_H

#include <stdbool.h>
#include <stddef.h>

/* How much of /proc/PID/cmdline is worth reading: a JVM's class path alone
 * can be 100 KiB (one argument can be 128 KiB, MAX_ARG_STRLEN); a main
 * class past this is not looked for. */
#define CMDLINE_NAME_READ_MAX (256u << 10)
/* A name taken from the command line is cut to this many bytes. */
#define CMDLINE_NAME_MAX 128

/* Whether exe, an executable's base name, is an interpreter whose
 * processes are named from their command line: python, python3,
 * python3.11 (and suffixed builds: python3.11d, python3.13t), pypy*,
 * java, node, nodejs, ruby*, perl*, and the shells sh, bash, dash, zsh,
 * ksh, mksh. exe may be NULL (false). */
bool cmdline_name__interpreter(const char *exe);

/* The name of a process whose executable's base name is exe, from the text
 * of its /proc/PID/cmdline (len bytes, not necessarily NUL-terminated),
 * written into out (outlen bytes, NUL-terminated, at most CMDLINE_NAME_MAX
 * bytes of it): the script's base name without its extension (python3
 * /usr/bin/pylint -> pylint, node server.js -> server), a Python module
 * (python3 -m http.server -> http.server), a jar without ".jar" and its
 * version (java -jar app-1.2.0.jar -> app) or a main class's simple name
 * (java -Xmx1g com.example.Main -> Main), interpreter options skipped.
 * Only the characters A-Z a-z 0-9 . _ - are kept, any other byte becomes
 * '_'. Returns false, writing nothing, when exe is not an interpreter or
 * the command line has no such shape (inline code: python3 -c, node -e,
 * sh -c; a bare REPL; argv[0] not the interpreter's name, as after
 * setproctitle; a name without a letter or digit): the caller keeps the
 * executable's name. */
bool cmdline_name__derive(const char *exe, const char *cmdline, size_t len, char *out,
                          size_t outlen);

#endif
