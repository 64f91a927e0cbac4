/* C++ and Rust symbol names made readable. */
#ifndef CODEXRAY_AGENT_SYMBOLIZE_DEMANGLE_H
#define CODEXRAY_AGENT_SYMBOLIZE_DEMANGLE_H

/* Returns a malloc'd demangled name (the caller frees it), or NULL when name
 * is not mangled (C, Go) or does not demangle. Handles the Itanium C++ ABI
 * (_Z...) and Rust's legacy (_ZN...17h<hash>E) and v0 (_R...) schemes. */
char *demangle(const char *name);

#endif
