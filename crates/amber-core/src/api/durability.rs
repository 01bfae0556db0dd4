//! Per-file durability and atomicity through the library: typed
//! shorthands for setxattr/getxattr of `user.amberfs.durability` and
//! `user.amberfs.atomicity` (crate::durability), which the generic xattr
//! calls accept as well.

use super::Fs;
use crate::durability::{Atomicity, Durability, ATOMICITY_XATTR, DURABILITY_XATTR};
use crate::error::Result;
use crate::fs::XattrSet;
use amber_pmem::PmDevice;

impl<D: PmDevice> Fs<D> {
    /// Sets when writes to file `p` become durable; on a directory, what
    /// files and directories created in it from now on inherit.
    pub fn set_durability(&self, p: &str, d: Durability) -> Result<()> {
        let ino = self.resolve(p)?;
        let v = d.name().as_bytes();
        self.core
            .setxattr(ino, DURABILITY_XATTR, v, XattrSet::Either)
    }

    /// The durability `p` asks for (`Posix` when unset).
    pub fn durability(&self, p: &str) -> Result<Durability> {
        self.core.durability(self.resolve(p)?)
    }

    /// Sets whether each write to `p` must be all-or-nothing across a
    /// crash; `Write` is refused (Unsupported) unless the mounted policy
    /// makes every write atomic.
    pub fn set_atomicity(&self, p: &str, a: Atomicity) -> Result<()> {
        let ino = self.resolve(p)?;
        let v = a.name().as_bytes();
        self.core
            .setxattr(ino, ATOMICITY_XATTR, v, XattrSet::Either)
    }

    /// The atomicity `p` asks for (`None` when unset).
    pub fn atomicity(&self, p: &str) -> Result<Atomicity> {
        self.core.atomicity(self.resolve(p)?)
    }
}
