//! Whole-tree comparison: walks the model and Amber side by side and
//! compares names, kinds, sizes, contents, link counts, symlink targets,
//! permissions, and inode identity (two names of one model node must be
//! one Amber inode, distinct nodes distinct inodes).

use super::apply::{first_diff, kind_of, stat_of};
use super::tree::{Body, Id, Kind, Tree, ROOT};
use amber_core::Fs;
use amber_pmem::MmapDevice;
use std::collections::HashMap;

struct Walk<'a> {
    fs: &'a Fs<MmapDevice>,
    tree: &'a Tree,
    ino_of: HashMap<Id, u64>,
    id_of: HashMap<u64, Id>,
}

impl Walk<'_> {
    fn same_inode(&mut self, path: &str, id: Id, ino: u64) -> Result<(), String> {
        let a = *self.ino_of.entry(id).or_insert(ino);
        let b = *self.id_of.entry(ino).or_insert(id);
        if a != ino || b != id {
            return Err(format!(
                "{path}: inode {ino} but the model's node {id} is inode {a} and inode {ino} is node {b}"
            ));
        }
        Ok(())
    }

    fn node(&mut self, path: &str, id: Id) -> Result<(), String> {
        let m = self
            .fs
            .symlink_metadata(path)
            .map_err(|e| format!("{path}: symlink_metadata: {e:?}"))?;
        self.same_inode(path, id, m.attr().ino)?;
        let want = self.tree.stat_of(id);
        let got = stat_of(&m);
        if got != want {
            return Err(format!("{path}: stat {got:?}, model {want:?}"));
        }
        match &self.tree.node(id).body {
            Body::File(data) => {
                let got = self
                    .fs
                    .read(path)
                    .map_err(|e| format!("{path}: read: {e:?}"))?;
                if let Some(i) = first_diff(&got, data) {
                    return Err(format!(
                        "{path}: contents differ at byte {i} (amber {} bytes, model {})",
                        got.len(),
                        data.len()
                    ));
                }
            }
            Body::Symlink(t) => {
                let got = self
                    .fs
                    .read_link(path)
                    .map_err(|e| format!("{path}: read_link: {e:?}"))?;
                if &got != t {
                    return Err(format!("{path}: symlink to {got:?}, model {t:?}"));
                }
            }
            Body::Dir { entries, .. } => {
                let mut got: Vec<(String, Kind, u64)> = self
                    .fs
                    .read_dir(path)
                    .map_err(|e| format!("{path}: read_dir: {e:?}"))?
                    .into_iter()
                    .map(|e| (e.name, kind_of(e.file_type), e.ino))
                    .collect();
                got.sort();
                let names: Vec<(&str, Kind)> =
                    got.iter().map(|(n, k, _)| (n.as_str(), *k)).collect();
                let want: Vec<(&str, Kind)> = entries
                    .iter()
                    .map(|(n, c)| (n.as_str(), self.tree.kind(*c)))
                    .collect();
                if names != want {
                    return Err(format!("{path}: entries {names:?}, model {want:?}"));
                }
                let base = if path.ends_with('/') {
                    path.to_string()
                } else {
                    format!("{path}/")
                };
                for ((name, _, ino), (_, child)) in got.iter().zip(entries) {
                    let p = format!("{base}{name}");
                    self.same_inode(&p, *child, *ino)?;
                    self.node(&p, *child)?;
                }
            }
        }
        Ok(())
    }
}

/// Compares the whole tree under `pre` ("" for the root) with `tree`.
pub fn check_tree(fs: &Fs<MmapDevice>, pre: &str, tree: &Tree) -> Result<(), String> {
    let mut w = Walk {
        fs,
        tree,
        ino_of: HashMap::new(),
        id_of: HashMap::new(),
    };
    let root = if pre.is_empty() { "/" } else { pre };
    w.node(root, ROOT)
}
