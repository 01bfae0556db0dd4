//! The C and Python examples of libamberfs, built and run against the
//! library this build made (the same programs CI and README show).

use std::path::PathBuf;
use std::process::Command;

/// The directory cargo put this build's libamberfs.so in: `cargo test`
/// builds it beside this test's executable (target/<profile>/deps);
/// only `cargo build` copies it up to target/<profile>.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent().expect("target/<profile>/deps").to_path_buf()
}

/// Where an example makes its pool in /dev/shm; the file goes when this
/// is dropped, also when the test fails.
struct Pool(PathBuf);

impl Drop for Pool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn pool(name: &str) -> Pool {
    let p = PathBuf::from(format!(
        "/dev/shm/ffi-example-{name}-{}.pool",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&p);
    Pool(p)
}

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn c_example() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let lib = lib_dir();
    let work = tempfile::tempdir().unwrap();
    let exe = work.path().join("example");
    run(Command::new("cc")
        .args(["-Wall", "-Werror", "-I"])
        .arg(format!("{dir}/include"))
        .arg(format!("{dir}/examples/example.c"))
        .arg("-L")
        .arg(&lib)
        .arg("-lamberfs")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe));
    let p = pool("c");
    run(Command::new(&exe).arg(&p.0));
}

#[test]
fn python_example() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let p = pool("py");
    run(Command::new("python3")
        .arg(format!("{dir}/examples/example.py"))
        .arg(lib_dir().join("libamberfs.so"))
        .arg(&p.0));
}
