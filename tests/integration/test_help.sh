#!/usr/bin/env bash
# Every command of the walship CLI answers -h and --help (and `walship help
# COMMAND`) with its own help on stdout, exit 0; `walship help` lists every
# command; and each command's help names every option its getopt table
# parses, and no option it does not parse.
#
# The commands come from the CLI's own command table (tools/main.c,
# `commands[]`) and the options from each command's `struct option` table
# and getopt short-option string (tools/*.c), so a new command or option
# cannot be missed: the parse-vs-help drift is checked from the source.
#
# Env: WS_BIN (walship), WS_SRC (the source tree), WS_TEST_TMP.
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
: "${WS_SRC:?WS_SRC must name the source tree}"
TOOLS="$WS_SRC/tools"

# "name function" per entry of main.c's command table.
awk '/^} commands\[\] = \{/ { on = 1; next }
     on && /^};/ { exit }
     on && match($0, /^\t\{ "[a-z-]+", cmd_[a-z_]+,/) {
	split(substr($0, RSTART, RLENGTH), f, /[{", \t]+/); print f[2], f[3] }' \
	"$TOOLS/main.c" >commands
check "the command table lists the commands ($(wc -l <commands) found)" [ "$(wc -l <commands)" -ge 8 ]

# opts_of FUNC: the long options ("--name") and short ones ("-x") the
# function's getopt parses, one per line, from its option table and
# short-option string. OPT_HELP_ENTRY is main.c's --help entry.
opts_of() {
	awk -v fn="$1" '
	$0 ~ "^(static )?int " fn "\\(int argc, char \\*\\*argv\\)$" { on = 1; next }
	on && /^}/ { exit }
	on && /OPT_HELP_ENTRY/ { print "--help" }
	on && match($0, /^\t\t\{ "[a-z0-9-]+", (no|required|optional)_argument/) {
		split(substr($0, RSTART, RLENGTH), f, "\""); print "--" f[2] }
	on && match($0, /getopt_long\(argc, argv, "[^"]*"/) {
		s = substr($0, RSTART, RLENGTH); sub(/.*, "/, "", s); sub(/"$/, "", s)
		gsub(/:/, "", s)
		for (i = 1; i <= length(s); i++) print "-" substr(s, i, 1)
	}' "$TOOLS"/*.c | sort -u
}

# has_opt FILE OPT: OPT stands in FILE as an option of its own (--force is
# not found in --force-pread, nor --checkpoint in --checkpoints).
has_opt() {
	grep -Eq -- "(^|[^a-z0-9-])$2([^a-z0-9-]|$)" "$1"
}

ws help
cp out listing
check "walship help: exit 0, the list on stdout, nothing on stderr" [ "$rc" = 0 ] && [ -s listing ] && [ ! -s err ]
ws --help
check "walship --help prints what walship help does" [ "$rc" = 0 ] && cmp -s out listing
ws -h
check "walship -h prints what walship help does" [ "$rc" = 0 ] && cmp -s out listing

while read -r name fn; do
	if grep -Eq "^  $name +[a-z]" listing; then ok "$name: listed by walship help"; else bad "$name: listed by walship help"; fi

	ws "$name" --help
	cp out "help.$name"
	if [ "$rc" = 0 ] && [ ! -s err ] && head -n1 out | grep -q "^usage: walship $name\b"; then
		ok "$name --help: exit 0, its own usage on stdout"
	else
		bad "$name --help: exit 0, its own usage on stdout (rc=$rc)"
	fi
	ws "$name" -h
	check "$name -h: the same help" [ "$rc" = 0 ] && cmp -s out "help.$name"
	ws help "$name"
	check "help $name: the same help" [ "$rc" = 0 ] && cmp -s out "help.$name"

	# Parse vs help: what the command parses, its help names...
	opts_of "$fn" >"opts.$name"
	missing=""
	while read -r opt; do
		has_opt "help.$name" "$opt" || missing="$missing $opt"
	done <"opts.$name"
	check "$name: its help names each of the $(wc -l <"opts.$name") options it parses${missing:+ (missing:$missing)}" \
		[ -z "$missing" ]
	# ... and every option its help names, it parses (options: section).
	extra=""
	for opt in $(sed -n '/^options:/,/^$/p' "help.$name" | grep -oE '(^|[ ,])--?[a-z][a-z0-9-]*' |
		tr -d ' ,' | sort -u); do
		grep -qx -- "$opt" "opts.$name" || extra="$extra $opt"
	done
	check "$name: its help names no option it does not parse${extra:+ (not parsed:$extra)}" [ -z "$extra" ]

	ws "$name" --no-such-option-xyz
	if [ "$rc" = 2 ] && grep -q -- '--no-such-option-xyz' err; then
		ok "$name --no-such-option-xyz: exit 2, naming the option"
	else
		bad "$name --no-such-option-xyz: exit 2, naming the option (rc=$rc)"
	fi
done <commands

# The table's functions each parse at least --help (a table this script can
# no longer read would otherwise pass with nothing checked).
check "every command with an option table parses --help" \
	bash -c 'for f in opts.*; do grep -qx -- --help "$f" || [ "$f" = opts.help ] || [ "$f" = opts.version ] || exit 1; done'
check "replicate's options were found in the source" grep -qx -- --force-pread opts.replicate
check "restore's short -o was found in the source" grep -qx -- -o opts.restore

ws help no-such-command
check "help no-such-command: exit 2" [ "$rc" = 2 ] && grep -q "no-such-command" err
ws no-such-command --help
check "no-such-command --help: exit 2, naming it" [ "$rc" = 2 ] && grep -q "no-such-command" err

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
