//! Tests that need a second process: the pool lock across processes, and
//! the process-wide `AMBER_FLUSH` variable.
//!
//! They live in their own test binary because spawning a child forks this
//! process, and between fork and exec the child holds duplicates of every
//! open descriptor, pool locks included; tests in the same binary that
//! reopen a pool could then see it as in use.

use std::path::Path;
use std::process::Command;

use amber_pmem::{FlushKind, MapError, MapOptions, MmapDevice};

const POOL: u64 = 4 << 20;

fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").expect("tmpfs /dev/shm for test pools")
}

/// Runs the named test of this binary in a child process with `env` set,
/// for tests that need another process or a process-wide variable.
fn run_child(test: &str, env: &[(&str, &str)]) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child {test} failed: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn assert_in_use(result: Result<MmapDevice, MapError>) {
    match result {
        Err(err @ MapError::InUse { .. }) => {
            assert!(
                err.to_string().contains("in use by another process"),
                "{err}"
            )
        }
        Err(other) => panic!("expected InUse, got {other}"),
        Ok(_) => panic!("a second open of a locked pool succeeded"),
    }
}

const LOCK_CHILD_ENV: &str = "AMBER_PMEM_TEST_LOCKED_POOL";

#[test]
fn open_in_another_process_is_refused() {
    if let Ok(path) = std::env::var(LOCK_CHILD_ENV) {
        assert_in_use(MmapDevice::open(Path::new(&path), &MapOptions::default()));
        return;
    }
    let dir = shm_dir();
    let path = dir.path().join("pool");
    let _held = MmapDevice::create(&path, POOL, &MapOptions::default()).unwrap();
    run_child(
        "open_in_another_process_is_refused",
        &[(LOCK_CHILD_ENV, path.to_str().unwrap())],
    );
}

#[test]
fn flush_env_override_is_honoured_and_validated() {
    match std::env::var("AMBER_FLUSH").as_deref() {
        Ok("clflush") => {
            let dev = MmapDevice::anonymous(1 << 20, &MapOptions::default()).unwrap();
            assert_eq!(dev.info().flush, FlushKind::Clflush);
            let dev = MmapDevice::anonymous(
                1 << 20,
                &MapOptions {
                    flush_override: Some(FlushKind::None),
                    ..MapOptions::default()
                },
            )
            .unwrap();
            assert_eq!(dev.info().flush, FlushKind::None, "explicit override wins");
        }
        Ok("sometimes") => match MmapDevice::anonymous(1 << 20, &MapOptions::default()) {
            Err(err @ MapError::BadFlushOverride { .. }) => {
                assert!(err.to_string().contains("clwb, clflushopt"), "{err}")
            }
            other => panic!("expected BadFlushOverride, got {:?}", other.err()),
        },
        _ => {
            let me = "flush_env_override_is_honoured_and_validated";
            run_child(me, &[("AMBER_FLUSH", "clflush")]);
            run_child(me, &[("AMBER_FLUSH", "sometimes")]);
        }
    }
}
