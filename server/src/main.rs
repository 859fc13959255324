//! `petrel`: composition root only. Parses the configuration, installs logging, and runs
//! the server until SIGINT/SIGTERM.

use std::io::BufRead;
use std::process::ExitCode;

use clap::Parser;
use petrel_server::config::{Cli, Command, ServeArgs};

fn main() -> ExitCode {
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
        Some(Command::Scheduler(args)) => {
            petrel_server::telemetry::init(args.log_format.unwrap_or_default());
            match args.resolve() {
                Ok(options) => run("scheduler", petrel_distributed::run_scheduler(options)),
                Err(e) => {
                    eprintln!("petrel scheduler: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Some(Command::Executor(args)) => {
            petrel_server::telemetry::init(args.log_format.unwrap_or_default());
            match args.resolve() {
                Ok(options) => run("executor", petrel_distributed::run_executor(options)),
                Err(e) => {
                    eprintln!("petrel executor: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Some(Command::Serve(args)) => serve(*args),
        None => serve(cli.serve),
    }
}

/// Runs a cluster process (`petrel scheduler`, `petrel executor`) until it stops.
fn run<E: std::fmt::Display>(
    what: &str,
    process: impl std::future::Future<Output = Result<(), E>>,
) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("petrel {what}: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(process) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("petrel {what}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> ExitCode {
    let cfg = match args.resolve() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("petrel: {e}");
            return ExitCode::from(2);
        }
    };
    petrel_server::telemetry::init(cfg.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("petrel: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(petrel_server::server::serve(
        cfg,
        petrel_server::server::shutdown_signal(),
    )) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("petrel: {e}");
            ExitCode::FAILURE
        }
    }
}
