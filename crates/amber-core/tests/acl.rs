//! POSIX ACLs in the core: an access ACL sets the mode, chmod rewrites
//! the ACL, a default ACL is inherited in place of the umask, bad values
//! are refused, and all of it survives a remount and a crash with a clean
//! fsck.

use amber_core::acl::{from_text, to_text};
use amber_core::check::{check, CheckOptions};
use amber_core::fs::{mount, XattrSet};
use amber_core::{Core, FsError, Owner, SetAttr};
use amber_format::acl::{ACCESS_XATTR, DEFAULT_XATTR, VERSION};
use amber_format::FileKind;
use amber_format::ROOT_INO;
use amber_pmem::MmapDevice;

mod common;
use common::{direct, fresh_core};

const ME: Owner = Owner::new(1000, 1000);

fn acl(text: &str) -> Vec<u8> {
    from_text(text).unwrap().encode()
}

fn text_of(fs: &Core<MmapDevice>, ino: u64, name: &[u8]) -> Option<String> {
    match fs.getxattr(ino, name) {
        Ok(v) => Some(to_text(&amber_format::acl::decode(&v).unwrap().unwrap())),
        Err(FsError::NoAttribute) => None,
        Err(e) => panic!("{e}"),
    }
}

fn perm(fs: &Core<MmapDevice>, ino: u64) -> u32 {
    fs.getattr(ino).unwrap().perm
}

#[test]
fn an_access_acl_is_the_mode_and_chmod_keeps_them_in_step() {
    let (_dev, fs) = fresh_core();
    let f = fs
        .mknod(ROOT_INO, b"f", FileKind::Regular, 0o2644, 0, ME)
        .unwrap()
        .ino;
    fs.set_acl(
        f,
        ACCESS_XATTR,
        &acl("u::rw-,u:7:rwx,g::r--,m::r-x,o::---"),
        false,
    )
    .unwrap();
    assert_eq!(perm(&fs, f), 0o2650);
    fs.setattr(
        f,
        &SetAttr {
            perm: Some(0o604),
            ..SetAttr::default()
        },
    )
    .unwrap();
    assert_eq!(
        text_of(&fs, f, ACCESS_XATTR).unwrap(),
        "u::rw-,u:7:rwx,g::r--,m::---,o::r--"
    );
    // A caller outside the group loses set-group-ID.
    fs.setattr(
        f,
        &SetAttr {
            perm: Some(0o2640),
            ..SetAttr::default()
        },
    )
    .unwrap();
    fs.set_acl(
        f,
        ACCESS_XATTR,
        &acl("u::rw-,u:7:r--,g::r--,m::r--,o::---"),
        true,
    )
    .unwrap();
    assert_eq!(perm(&fs, f), 0o640);
    // An ACL the mode says alone is the mode, not an attribute.
    fs.set_acl(f, ACCESS_XATTR, &acl("u::rwx,g::r-x,o::r--"), false)
        .unwrap();
    assert_eq!(perm(&fs, f), 0o754);
    assert_eq!(text_of(&fs, f, ACCESS_XATTR), None);
    assert!(!fs.has_acl(f).unwrap());
    // Through setxattr too, and removal keeps the mode.
    fs.setxattr(
        f,
        ACCESS_XATTR,
        &acl("u::rw-,g::rw-,m::r--,o::---"),
        XattrSet::Either,
    )
    .unwrap();
    assert_eq!(perm(&fs, f), 0o640);
    assert!(fs.has_acl(f).unwrap());
    fs.removexattr(f, ACCESS_XATTR).unwrap();
    assert_eq!(perm(&fs, f), 0o640);
}

#[test]
fn bad_acls_are_refused() {
    let (_dev, fs) = fresh_core();
    let f = fs
        .mknod(ROOT_INO, b"f", FileKind::Regular, 0o644, 0, ME)
        .unwrap()
        .ino;
    let l = fs.symlink(ROOT_INO, b"l", b"f", ME).unwrap().ino;
    let named_without_mask = {
        let mut v = acl("u::rw-,u:7:r--,g::r--,m::r--,o::---");
        v.drain(28..36);
        v
    };
    for bad in [&b"\x02\0\0"[..], b"\x01\0\0\0", &named_without_mask] {
        assert!(matches!(
            fs.set_acl(f, ACCESS_XATTR, bad, false),
            Err(FsError::InvalidArgument(_))
        ));
    }
    assert!(matches!(
        fs.set_acl(f, DEFAULT_XATTR, &acl("u::rw-,g::r--,o::---"), false),
        Err(FsError::AccessDenied(_))
    ));
    // Removing a default ACL a file does not have is no error.
    fs.set_acl(f, DEFAULT_XATTR, &VERSION.to_le_bytes(), false)
        .unwrap();
    assert!(matches!(
        fs.set_acl(l, ACCESS_XATTR, &acl("u::rw-,g::r--,o::---"), false),
        Err(FsError::Unsupported(_))
    ));
    assert_eq!(perm(&fs, f), 0o644);
}

#[test]
fn a_default_acl_replaces_the_umask_and_passes_to_directories() {
    let (_dev, fs) = fresh_core();
    let masked = ME.with_umask(0o077);
    let plain = fs.mkdir(ROOT_INO, b"plain", 0o777, masked).unwrap();
    assert_eq!(plain.perm, 0o700);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, ME).unwrap().ino;
    let default = "u::rwx,u:7:rwx,g::r-x,m::rwx,o::r-x";
    fs.set_acl(d, DEFAULT_XATTR, &acl(default), false).unwrap();
    assert_eq!(perm(&fs, d), 0o755, "a default ACL leaves the mode");
    let f = fs
        .mknod(d, b"f", FileKind::Regular, 0o666, 0, masked)
        .unwrap();
    assert_eq!(f.perm, 0o664, "the ACL, not the umask, limits it");
    assert_eq!(
        text_of(&fs, f.ino, ACCESS_XATTR).unwrap(),
        "u::rw-,u:7:rwx,g::r-x,m::rw-,o::r--"
    );
    assert_eq!(text_of(&fs, f.ino, DEFAULT_XATTR), None);
    let sub = fs.mkdir(d, b"sub", 0o777, masked).unwrap();
    assert_eq!(sub.perm, 0o775);
    assert_eq!(text_of(&fs, sub.ino, DEFAULT_XATTR).unwrap(), default);
    let l = fs.symlink(d, b"l", b"f", masked).unwrap();
    assert_eq!(l.perm, 0o777);
    assert!(!fs.has_acl(l.ino).unwrap());
    // A default ACL of three entries gives a mode and no access ACL.
    fs.set_acl(d, DEFAULT_XATTR, &acl("u::rwx,g::r-x,o::---"), false)
        .unwrap();
    let g = fs
        .mknod(d, b"g", FileKind::Regular, 0o666, 0, masked)
        .unwrap();
    assert_eq!(g.perm, 0o640);
    assert!(!fs.has_acl(g.ino).unwrap());
}

#[test]
fn acls_survive_remount_and_crash_with_a_clean_fsck() {
    let (dev, fs) = fresh_core();
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, ME).unwrap().ino;
    fs.set_acl(
        d,
        DEFAULT_XATTR,
        &acl("u::rwx,g::r-x,g:9:rwx,m::rwx,o::---"),
        false,
    )
    .unwrap();
    let f = fs
        .mknod(d, b"f", FileKind::Regular, 0o640, 0, ME)
        .unwrap()
        .ino;
    fs.unmount().unwrap();
    drop(fs);
    let (fs, _) = mount(dev.clone(), direct()).unwrap();
    assert_eq!(
        text_of(&fs, f, ACCESS_XATTR).unwrap(),
        "u::rw-,g::r-x,g:9:rwx,m::r--,o::---"
    );
    fs.setattr(
        f,
        &SetAttr {
            perm: Some(0o660),
            ..SetAttr::default()
        },
    )
    .unwrap();
    drop(fs); // crash
    let report = check(&*dev, &CheckOptions::default()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    let (fs, rep) = mount(dev, direct()).unwrap();
    assert!(!rep.was_clean);
    assert_eq!(perm(&fs, f), 0o660);
    assert_eq!(
        text_of(&fs, f, ACCESS_XATTR).unwrap(),
        "u::rw-,g::r-x,g:9:rwx,m::rw-,o::---"
    );
}
