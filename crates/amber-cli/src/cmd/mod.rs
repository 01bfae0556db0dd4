//! One module per subcommand: its arguments and what it does.

pub mod bench;
pub mod cat;
pub mod crashtest;
pub mod demo;
pub mod fsck;
pub mod fstab;
pub mod get;
pub mod info;
pub mod ls;
pub mod mkdir;
pub mod mkfs;
pub mod mount;
pub mod put;
pub mod rm;
pub mod salvage;
pub mod stats;
pub mod umount;
