//! `amberfs`: create, inspect and use Amber pools from the shell, offline
//! or mounted in the kernel's namespace through FUSE.
#![forbid(unsafe_code)]

mod cmd;
mod common;
mod control;
mod copytree;
mod daemon_log;
mod leasing;
mod output;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Parser, Subcommand};

use common::{warn, CliResult, MountConfig};

#[derive(Parser)]
#[command(
    name = "amberfs",
    version,
    about = "Amber persistent-memory file system tool"
)]
struct Cli {
    /// Make the pool write like slower media while mounted: a preset
    /// (dram, pcm, optane, cxl) or keys like `lat=200ns,per=line,bw=1GB/s`.
    #[arg(long, global = true, value_name = "PRESET")]
    emulate: Option<String>,
    /// Mount options, e.g. `sync` or `policy=direct` (the default policy is
    /// amber, which needs a split-layout pool: mkfs's default).
    #[arg(short = 'o', global = true, value_name = "OPTIONS", long_help = mount_options_help())]
    options: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// `-o`'s long help: the options every mount takes, then each policy's
/// from its row in the core's registry.
fn mount_options_help() -> String {
    use amber_core::data::{registry, POLICIES};
    format!(
        "Mount options, comma-separated: {}. The default policy is amber, which needs a \
         split-layout pool (mkfs's default). Policies: {}. Policy options:\n{}",
        registry::GENERIC_OPTIONS,
        POLICIES.join(", "),
        registry::options_help()
    )
}

#[derive(Subcommand)]
enum Command {
    /// Create a pool file, or reformat an existing pool with --force.
    Mkfs(cmd::mkfs::Args),
    /// Show a pool's superblock and how it is mapped.
    Info(cmd::info::Args),
    /// Check a pool offline (exit codes as e2fsck: 0 clean, 1 repaired,
    /// 4 errors left, 8 could not check).
    Fsck(cmd::fsck::Args),
    /// Check that every crash image of the built-in workloads recovers.
    Crashtest(cmd::crashtest::Args),
    /// List a directory in the pool.
    Ls(cmd::ls::Args),
    /// Copy a local file into the pool.
    Put(cmd::put::Args),
    /// Copy a file (with -r, a directory tree) out of the pool.
    Get(cmd::get::Args),
    /// Copy every file that can still be read out of a damaged pool,
    /// without writing to it (when fsck cannot repair it or mount
    /// refuses it).
    Salvage(cmd::salvage::Args),
    /// Create a directory in the pool.
    Mkdir(cmd::mkdir::Args),
    /// Remove a file or (with -r) a directory tree from the pool.
    Rm(cmd::rm::Args),
    /// Write a file from the pool to standard output.
    Cat(cmd::cat::Args),
    /// Serve a pool at a directory through FUSE (a daemon unless --foreground).
    Mount(cmd::mount::Args),
    /// Unmount a pool and wait until its daemon has closed it cleanly.
    Umount(cmd::umount::Args),
    /// Show a running mount's counters (PM writes, fences, space, the
    /// policy's queues, buffer and zone), read from its daemon.
    Stats(cmd::stats::Args),
    /// Measure Amber beside its baselines (medians of repetitions).
    Bench(Box<cmd::bench::Args>),
    /// The main job: make a pool in /dev/shm behind emulated PM (default
    /// pcm), use it, verify it, fsck it and crash-test the build.
    Demo(cmd::demo::Args),
}

impl Command {
    /// Whether the command mounts the pool: only then do `--emulate` and
    /// `-o` mean anything, and silently ignoring them would mislead.
    fn mounts(&self) -> bool {
        !matches!(
            self,
            Command::Mkfs(_)
                | Command::Info(_)
                | Command::Fsck(_)
                | Command::Salvage(_)
                | Command::Crashtest(_)
                | Command::Bench(_)
                | Command::Demo(_)
                | Command::Umount(_)
                | Command::Stats(_)
        )
    }
}

fn run(cli: Cli) -> CliResult<ExitCode> {
    let emulates =
        cli.command.mounts() || matches!(cli.command, Command::Bench(_) | Command::Demo(_));
    if (!emulates && cli.emulate.is_some()) || (!cli.command.mounts() && cli.options.is_some()) {
        return Err(common::CliError::new(
            "--emulate applies only to commands that mount the pool (ls, put, get, mkdir, \
             rm, cat, mount) and to bench and demo; -o only to the former; drop them here",
        ));
    }
    let mount = || MountConfig::parse(cli.emulate.as_deref(), cli.options.as_deref());
    match cli.command {
        Command::Mkfs(args) => cmd::mkfs::run(args),
        Command::Info(args) => cmd::info::run(args),
        Command::Fsck(args) => cmd::fsck::run(args),
        Command::Crashtest(args) => cmd::crashtest::run(args),
        Command::Ls(args) => cmd::ls::run(args, &mount()?.reading()),
        Command::Put(args) => cmd::put::run(args, &mount()?),
        Command::Get(args) => cmd::get::run(args, &mount()?.reading()),
        Command::Salvage(args) => cmd::salvage::run(args),
        Command::Mkdir(args) => cmd::mkdir::run(args, &mount()?),
        Command::Rm(args) => cmd::rm::run(args, &mount()?),
        Command::Cat(args) => cmd::cat::run(args, &mount()?.reading()),
        Command::Mount(args) => {
            cmd::mount::run(args, cli.emulate.as_deref(), cli.options.as_deref())
        }
        Command::Umount(args) => cmd::umount::run(args),
        Command::Stats(args) => cmd::stats::run(args),
        Command::Bench(args) => cmd::bench::run(*args, cli.emulate.as_deref()),
        Command::Demo(args) => cmd::demo::run(args, cli.emulate.as_deref()),
    }
}

fn main() -> ExitCode {
    if let Some(helped) = cmd::fstab::as_helper() {
        return exit_code(helped);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version: output like any command's.
        Err(e) if !e.use_stderr() => {
            let help = output::out_line(format_args!("{}", e.render().to_string().trim_end()));
            return exit_code(help.map(|()| ExitCode::SUCCESS));
        }
        // Bare `amberfs`: the help is the message.
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            output::note(format_args!("{}", e.render().to_string().trim_end()));
            return ExitCode::FAILURE;
        }
        Err(e) => {
            // Usage errors follow the same `amberfs:` form and exit status
            // as every other failure, so scripts need one rule.
            let text = e.render().to_string();
            warn(text.strip_prefix("error: ").unwrap_or(&text).trim_end());
            return ExitCode::FAILURE;
        }
    };
    exit_code(run(cli))
}

/// A command's exit status: its own, 141 for a closed standard output
/// (crate::output), or 1 with its message.
fn exit_code(result: CliResult<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) if e.is_closed_output() => ExitCode::from(output::CLOSED_OUTPUT_STATUS),
        Err(e) => {
            warn(e);
            ExitCode::FAILURE
        }
    }
}
