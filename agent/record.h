/* `codexray-node-agent record`: one gzipped pprof of every process (or one)
 * over a fixed span. */
#ifndef CODEXRAY_AGENT_RECORD_H
#define CODEXRAY_AGENT_RECORD_H

/* Runs the one-shot mode with the arguments after "record". Returns the
 * process's exit status: 0 written, 1 failed, 2 usage. */
int record__main(int argc, char **argv);

#endif
