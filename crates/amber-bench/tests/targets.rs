//! Every kind of target does the same operations with the same results.

use amber_bench::bare::BareTarget;
use amber_bench::target::{AmberTarget, DropCaches, PosixTarget, Target};

fn exercise(t: &dyn Target) {
    t.mkdir_all("a/b").unwrap();
    let mut f = t.create("a/b/f", false).unwrap();
    f.write_at(&[7u8; 5000], 0).unwrap();
    f.append(b"tail").unwrap();
    f.fsync().unwrap();
    assert_eq!(f.size().unwrap(), 5004);
    let mut buf = vec![0u8; 6000];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 5004);
    assert_eq!(&buf[5000..5004], b"tail");
    drop(f);
    t.reset().unwrap();
    assert_eq!(t.size("a/b/f").unwrap(), 5004);
    let mut g = t.open("a/b/f", true).unwrap();
    g.append(b"!").unwrap();
    drop(g);
    assert_eq!(t.list("a/b").unwrap(), vec!["f".to_string()]);
    t.remove_file("a/b/f").unwrap();
    t.create("a/b/g", true).unwrap();
    t.remove_all("a").unwrap();
    assert!(t.list("").unwrap().is_empty());
}

#[test]
fn posix_amber_and_bare_targets_agree() {
    let dir = tempfile::tempdir().unwrap();
    exercise(&PosixTarget::new(dir.path().join("root"), DropCaches::None).with_root_created());
    let pool = dir.path().join("t.pool");
    let amber = AmberTarget::create(&pool, 64 << 20, "direct", "dram").unwrap();
    exercise(&amber);
    assert!(amber.pm_stats().unwrap().bytes_written() > 5000);
    amber.destroy().unwrap();
    assert!(!pool.exists());
    let bare = BareTarget::create(&pool, 64 << 20, "dram").unwrap();
    let before = bare.pm_stats().unwrap();
    exercise(&bare);
    // File data only: 5000 + 4 + 1 bytes, one fence per write.
    let d = bare.pm_stats().unwrap().since(&before);
    assert_eq!((d.bytes_written(), d.fences), (5005, 3));
    bare.destroy().unwrap();
    assert!(!pool.exists());
}
