# Sourced (bash) by scripts/setup_jax.sh, setup_versions.sh and setup_plot.sh: a virtualenv's
# stamp, the file that records what was installed into it, so that a re-run whose stamp matches
# installs nothing and takes well under a second; and `quietly`, which shows an install step's
# output only where it fails. Sourcing it makes quietly's temporary file, removed at exit.
#
#   want=$(stamp_value "PACKAGES..." FILE...)
#   if ! stamp_matches "$VENV" "$want"; then ...install...; stamp_write "$VENV" "$want"; fi

# stamp_value WORDS FILE...: prints the stamp of WORDS (what is installed) and the FILEs' text
# (how: the script itself, and what it installs from)
stamp_value() {
  local words=$1
  shift
  (echo "$words"; cat "$@") | sha1sum | cut -c1-16
}

# stamp_matches VENV WANT: true where VENV's stamp says WANT
stamp_matches() {
  [ "$(cat "$1/.mpi_resolver-installed" 2>/dev/null)" = "$2" ]
}

# stamp_write VENV WANT: records WANT as VENV's stamp (once everything installed)
stamp_write() {
  echo "$2" > "$1/.mpi_resolver-installed"
}

_quietly_log=$(mktemp)
trap 'rm -f "$_quietly_log"' EXIT
# quietly COMMAND...: runs COMMAND; prints its output only if it fails, then ends the script
# ("setup_jax: failed: COMMAND...", named after the script that sourced this file)
quietly() {
  if ! "$@" > "$_quietly_log" 2>&1; then
    grep -v "^WARNING: Location" "$_quietly_log" >&2
    echo "$(basename "$0" .sh): failed: $*" >&2
    exit 1
  fi
}
