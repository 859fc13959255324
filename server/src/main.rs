//! `petrel`: composition root only. Parses the configuration, installs logging, and runs
//! the server until SIGINT/SIGTERM.

use std::io::BufRead;
use std::process::ExitCode;

use clap::Parser;
use petrel_server::config::{Cli, Command, ServeArgs};

fn main() -> ExitCode {
    // Before any Avro schema is parsed (manifests, manifest lists).
    petrel_table_provider::spec::avro_names::install();
    let cli = Cli::parse();
    match cli.command {
        Some(Command::HashPassword { password }) => {
            let password = match password {
                Some(p) => p,
                None => {
                    let mut line = String::new();
                    if std::io::stdin().lock().read_line(&mut line).is_err() {
                        eprintln!("petrel: cannot read a password from stdin");
                        return ExitCode::FAILURE;
                    }
                    line.trim_end_matches(['\r', '\n']).to_string()
                }
            };
            match petrel_server::auth::hash_password(&password) {
                Ok(h) => {
                    println!("{h}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("petrel: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Some(Command::Config { print_default }) => {
            if print_default {
                print!("{}", petrel_server::config::DEFAULT_TOML);
                ExitCode::SUCCESS
            } else {
                eprintln!(
                    "petrel config: nothing to do; `petrel config --print-default` prints the default configuration"
                );
                ExitCode::from(2)
            }
        }
        Some(Command::Scheduler(args)) => match args.resolve() {
            Ok(options) => {
                petrel_server::telemetry::init(args.log_format.unwrap_or_default());
                run(
                    "petrel scheduler",
                    petrel_distributed::run_scheduler(options),
                )
            }
            Err(e) => usage_error("petrel scheduler", &e),
        },
        Some(Command::Executor(args)) => match args.resolve() {
            Ok(options) => {
                petrel_server::telemetry::init(args.log_format.unwrap_or_default());
                run("petrel executor", petrel_distributed::run_executor(options))
            }
            Err(e) => usage_error("petrel executor", &e),
        },
        Some(Command::Serve(args)) => serve(*args),
        None => serve(cli.serve),
    }
}

/// Runs `process` on a multi-threaded runtime until it ends; errors are printed after
/// `prefix` (`petrel`, `petrel scheduler`, ...).
fn run<E: std::fmt::Display>(
    prefix: &str,
    process: impl std::future::Future<Output = Result<(), E>>,
) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Planning and evaluating an expression recurse once per level of its tree: 32 MiB
        // (virtual; pages are touched only as deep as a statement goes) holds the deepest
        // chain `sql_limits` lets through several times over. Tokio's default, 2 MiB, did
        // not.
        .thread_stack_size(32 << 20)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{prefix}: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(process) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{prefix}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A configuration that cannot be used: exit status 2.
fn usage_error(prefix: &str, error: &str) -> ExitCode {
    eprintln!("{prefix}: {error}");
    ExitCode::from(2)
}

fn serve(args: ServeArgs) -> ExitCode {
    let cfg = match args.resolve() {
        Ok(c) => c,
        Err(e) => return usage_error("petrel", &e),
    };
    petrel_server::telemetry::init(cfg.log_format);
    run(
        "petrel",
        petrel_server::server::serve(cfg, petrel_server::server::shutdown_signal()),
    )
}
