# pjdfstest for the mount's test scripts (sourced by tests/fuse/run.sh
# and tests/multiproc/run.sh, with $top set).

# Sets $pjd to a pjdfstest binary (PJDFSTEST, one on PATH, or 0.2.2 from
# crates.io into target/tools), and makes the unprivileged user and
# group `tests` it and the ACL steps switch to.
pjd_setup() {
    pjd=${PJDFSTEST:-$(command -v pjdfstest || true)}
    if [ -z "$pjd" ]; then
        pjd=$top/target/tools/bin/pjdfstest
        [ -x "$pjd" ] || cargo install --quiet --locked pjdfstest --version 0.2.2 --root "$top/target/tools"
    fi
    getent group tests >/dev/null || groupadd tests
    getent passwd tests >/dev/null || useradd -g tests -M -N -s /usr/sbin/nologin tests
}

# Runs pjdfstest in the new directory DIR (on the mount), its log in LOG,
# as "$@" pjdfstest ... (a prefix such as an environment, or nothing);
# prints what did not pass and fails unless nothing failed.
pjd_run() {
    local dir=$1 log=$2 secondary
    shift 2
    mkdir "$dir"
    chmod 0777 "$dir"
    # A directory on another file system, for the EXDEV tests.
    secondary=$(mktemp -d /dev/shm/amberfs-pjd-secondary.XXXXXX)
    chmod 0777 "$secondary"
    ( cd "$dir" && "$@" "$pjd" -c "$top/tests/fuse/pjdfstest.toml" -p "$dir" -s "$secondary" ) \
        > "$log" 2>&1 || true
    rm -rf "$secondary"
    grep -v '  ok$' "$log" | grep -v '^$' | head -n 60
    grep '^Summary' "$log" || true
    grep -q '^Summary: 0 failed' "$log" || { echo "pjdfstest reported failures (or did not finish)"; return 1; }
    rm -rf "$dir"
}
