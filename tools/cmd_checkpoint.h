/*
 * The checkpoint commands of the walship CLI (tools/cmd_checkpoint.c):
 *
 *   walship checkpoint --sink URL [--config FILE] [--epoch N]
 *   walship retention  --sink URL [--config FILE] [--dry-run] [--json]
 *   walship forget     --sink URL [--config FILE] --tenant NAME [--json]
 *   walship repair     --sink URL [--config FILE] [--dry-run] [--json]
 *   walship ls         --sink URL --checkpoints [--json]       (cmd_ls_checkpoints)
 *   walship restore    --sink URL --tenant NAME --checkpoint ID|latest [--force] -o OUT_DB
 *                                                              (cmd_restore_checkpoint)
 *
 * Each returns the process exit status: 0 ok, 1 failure, 2 usage or config.
 */
#ifndef WS_CMD_CHECKPOINT_H
#define WS_CMD_CHECKPOINT_H

#include <stdbool.h>

/* argv[0] is the command name ("checkpoint", "retention"); getopt starts after it. */
int cmd_checkpoint(int argc, char **argv);
int cmd_retention(int argc, char **argv);
int cmd_forget(int argc, char **argv);
/* Rebuild an undecodable (or lost) checkpoints/deployment or checkpoints/head. */
int cmd_repair(int argc, char **argv);

/* `ls --checkpoints`: every stored committed checkpoint, newest first. */
int cmd_ls_checkpoints(const char *sink_url, bool json);

/* `restore --checkpoint ID|latest`: the tenant exactly at that checkpoint's
 * cut; key_file: --key-file (NULL: $WALSHIP_KEY_FILE, if set). */
int cmd_restore_checkpoint(const char *sink_url, const char *tenant, const char *checkpoint, const char *out,
			   bool force, const char *key_file);

#endif
