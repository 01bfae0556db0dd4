//! Extended attributes (getxattr, setxattr, listxattr, removexattr). An
//! inode's attributes share one block (format::xattr); every change
//! rewrites that block inside a journal transaction, so it is atomic.
//! Names must lie in the user., trusted., security. or system. namespace;
//! who may use which namespace is the FUSE adapter's decision. The
//! `user.amberfs.` names are Amber's own (crate::durability): their values
//! are checked here, and the DRAM inode's parsed copy follows every change.

use super::acl::is_acl_name;
use super::{flags, live, Core};
use crate::durability::{self, Atomicity, Durability};
use crate::error::{FsError, Result};
use crate::inode::{has_capability, read_xattrs, InodeState, CAPABILITY_XATTR};
use crate::journal::Tx;
use amber_format::xattr::{self, Xattr, NAME_MAX};
use amber_format::FileKind;
use amber_pmem::PmDevice;
use std::ops::Range;

/// Namespaces an attribute name may start with.
const NAMESPACES: [&[u8]; 4] = [b"user.", b"trusted.", b"security.", b"system."];

// The format's shortest name is the shortest namespace and one byte.
const _: () = assert!(NAMESPACES[0].len() + 1 == xattr::NAME_MIN);

/// How setxattr treats an existing attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XattrSet {
    /// Create or replace.
    #[default]
    Either,
    /// Fail if it exists (XATTR_CREATE).
    Create,
    /// Fail if it does not exist (XATTR_REPLACE).
    Replace,
}

fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > NAME_MAX {
        return Err(FsError::NameTooLong);
    }
    if name.contains(&0)
        || !NAMESPACES
            .iter()
            .any(|ns| name.len() > ns.len() && name.starts_with(ns))
    {
        return Err(FsError::InvalidArgument(
            "attribute names start with user., trusted., security. or system.",
        ));
    }
    Ok(())
}

impl<D: PmDevice> Core<D> {
    /// The attributes of a loaded inode.
    pub(super) fn xattrs_of(&self, st: &InodeState) -> Result<Vec<Xattr>> {
        read_xattrs(&*self.dev, &self.layout, st.ino, st.disk.xattr_block)
    }

    /// The value of attribute `name`.
    pub fn getxattr(&self, ino: u64, name: &[u8]) -> Result<Vec<u8>> {
        check_name(name)?;
        let r = self.inode(ino)?;
        let st = r.read();
        live(&st)?;
        if name == durability::POLICY_XATTR {
            return Ok(self.policy_report(&st).into_bytes());
        }
        let attrs = self.xattrs_of(&st)?;
        attrs
            .into_iter()
            .find(|a| a.name == name)
            .map(|a| a.value)
            .ok_or(FsError::NoAttribute)
    }

    /// What `user.amberfs.policy` reads: the policy, the file's own state
    /// under it (`DataPolicy::describe`), then the policy's counters, one
    /// `key=value` per line.
    fn policy_report(&self, st: &InodeState) -> String {
        let mut out = format!("policy={}\n", self.policy.name());
        let maps = Self::describe_maps(st);
        for (k, v) in self
            .policy
            .describe(self.context(), st)
            .into_iter()
            .chain(maps)
        {
            out += &format!("{k}={v}\n");
        }
        for (k, v) in self.policy.stats() {
            out += &format!("pool.{k}={v}\n");
        }
        out
    }

    /// Names of every attribute (not the generated `user.amberfs.policy`,
    /// which is no stored attribute for a tool to copy).
    pub fn listxattr(&self, ino: u64) -> Result<Vec<Vec<u8>>> {
        let r = self.inode(ino)?;
        let st = r.read();
        live(&st)?;
        Ok(self.xattrs_of(&st)?.into_iter().map(|a| a.name).collect())
    }

    /// Sets attribute `name` to `value`. The ACL attributes are
    /// [`Core::set_acl`]'s (by a caller who keeps set-group-ID).
    pub fn setxattr(&self, ino: u64, name: &[u8], value: &[u8], how: XattrSet) -> Result<()> {
        check_name(name)?;
        if is_acl_name(name) {
            return self.set_acl(ino, name, value, false);
        }
        // Larger than Linux's limit: E2BIG. One that does not fit beside
        // the inode's other attributes is ENOSPC, from encoding the list.
        if value.len() > xattr::VALUE_MAX {
            return Err(FsError::AttributeTooLarge);
        }
        let setting = durability::check_set(name, value, self.policy.atomic_writes())?;
        let value: &[u8] = match setting {
            Some(s) => s.value(),
            None => value,
        };
        self.change_xattrs(ino, |kind, attrs, _| {
            if setting.is_some() && !matches!(kind, FileKind::Regular | FileKind::Directory) {
                // As Linux keeps user.* off other kinds; they have no
                // data to be durable and no entries to pass it on to.
                return Err(FsError::InvalidArgument(
                    "user.amberfs. attributes apply to regular files and directories",
                ));
            }
            let pos = attrs.iter().position(|a| a.name == name);
            match (pos, how) {
                (Some(_), XattrSet::Create) => Err(FsError::AlreadyExists),
                (None, XattrSet::Replace) => Err(FsError::NoAttribute),
                (Some(i), _) => {
                    attrs[i].value = value.to_vec();
                    Ok(())
                }
                (None, _) => {
                    attrs.push(Xattr {
                        name: name.to_vec(),
                        value: value.to_vec(),
                    });
                    Ok(())
                }
            }
        })
    }

    /// Removes attribute `name`.
    pub fn removexattr(&self, ino: u64, name: &[u8]) -> Result<()> {
        check_name(name)?;
        self.change_xattrs(ino, |_, attrs, _| {
            let i = attrs
                .iter()
                .position(|a| a.name == name)
                .ok_or(FsError::NoAttribute)?;
            attrs.remove(i);
            Ok(())
        })
    }

    /// Writes fresh blocks holding what a new file inherits from a
    /// directory with `durability` and `atomicity`, and the ACLs `acls`
    /// (None when that is nothing). Not fenced: the creating transaction's
    /// caller fences them before the inode links them, and frees them if
    /// the creation fails.
    pub(super) fn write_inherited(
        &self,
        durability: Durability,
        atomicity: Atomicity,
        acls: Vec<Xattr>,
    ) -> Result<Option<Range<u64>>> {
        let mut attrs = durability::inherited(durability, atomicity);
        attrs.extend(acls);
        self.write_new_list(&attrs)
    }

    /// Applies `f` (given the file's kind, to change the list and the mode)
    /// and commits the new list and mode together (`xattr_store.rs`). The
    /// DRAM inode's durability and atomicity follow the committed list.
    pub(super) fn change_xattrs(
        &self,
        ino: u64,
        f: impl FnOnce(FileKind, &mut Vec<Xattr>, &mut u32) -> Result<()>,
    ) -> Result<()> {
        self.check_writable()?;
        let r = self.inode(ino)?;
        let mut st = r.write();
        live(&st)?;
        flags::unchangeable(&st)?;
        let mut attrs = self.xattrs_of(&st)?;
        let mut mode = st.disk.mode;
        f(st.kind(), &mut attrs, &mut mode)?;
        assert_eq!(
            mode & !0o7777,
            st.disk.mode & !0o7777,
            "only permissions change"
        );
        self.store_xattrs(&mut st, attrs, mode)
    }

    /// Drops `security.capability` before a write changes the file, as
    /// Linux's file_remove_privs does for every writer, root included: a
    /// program's file capabilities do not outlive a change to it. The
    /// caller holds the inode and checked it may be written.
    pub(super) fn drop_capability(&self, st: &mut InodeState) -> Result<()> {
        let mut attrs = self.xattrs_of(st)?;
        attrs.retain(|a| a.name != CAPABILITY_XATTR);
        let mode = st.disk.mode;
        self.store_xattrs(st, attrs, mode)
    }

    /// Commits `attrs` as the inode's attribute list, with `mode`.
    fn store_xattrs(&self, st: &mut InodeState, attrs: Vec<Xattr>, mode: u32) -> Result<()> {
        let mut d = st.disk.clone();
        d.ctime = self.now();
        d.mode = mode;
        let mut tx = Tx::new();
        let staged = self.stage_xattrs(st, &attrs, &mut d, &mut tx)?;
        tx.inode(&self.layout, st.ino, &d);
        if let Err(e) = self.commit(tx) {
            staged.abandon(self);
            return Err(e);
        }
        staged.finish(self);
        st.disk = d;
        (st.durability, st.atomicity) = durability::of(&attrs);
        st.capability = has_capability(&attrs);
        Ok(())
    }
}
