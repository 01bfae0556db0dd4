//! One module per subcommand: its arguments and what it does.

pub mod cat;
pub mod get;
pub mod info;
pub mod ls;
pub mod mkdir;
pub mod mkfs;
pub mod put;
pub mod rm;
