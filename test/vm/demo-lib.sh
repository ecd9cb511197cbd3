# The printing helpers of make demo (test/vm/demo.sh sources this; demo_test.go runs
# them without a terminal and with one). bash.

# Step titles are bold on a terminal only, and never with NO_COLOR set (no-color.org):
# a log or a pipe gets plain text, no raw escape sequences.
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
	demo_bold=$'\033[1m' demo_plain=$'\033[0m'
else
	demo_bold='' demo_plain=''
fi
step() { printf '\n%s== %s%s\n' "$demo_bold" "$*" "$demo_plain"; }

# Every --stats client says that its device has no NIC completion timestamps (rxe has
# none); the demo shows that once, from the first client, and drops the repeats. once
# ends pipelines (client | once): lastpipe runs it in the script's own shell, so that
# what it has said is remembered.
shopt -s lastpipe
demo_nicts_said=
once() {
	if [ -z "$demo_nicts_said" ]; then
		demo_nicts_said=1
		cat
		return 0
	fi
	grep --line-buffered -v 'no NIC completion timestamps' || true
}
