/*
 * walship follow (tools/cmd_follow.c):
 *
 *   walship follow --sink URL --tenant NAME -o REPLICA_DB [--interval-ms N] [--json]
 *
 * Returns the process exit status: 0 stopped by SIGINT/SIGTERM, 1 failure,
 * 2 usage.
 */
#ifndef WS_CMD_FOLLOW_H
#define WS_CMD_FOLLOW_H

/* argv[0] is "follow"; getopt starts after it. */
int cmd_follow(int argc, char **argv);

#endif
