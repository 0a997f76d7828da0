//! demo-server: a small but real HTTP/1.1 + HTTP/2 server (TLS, response
//! cache, reverse proxy, static files, WAF), the default PGO target of
//! pgo-recipes.

mod access_log;
mod body;
mod cache;
mod config;
mod files;
mod metrics;
mod proxy;
mod server;
mod tls;
mod waf;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use config::Config;

const USAGE: &str = "usage: demo-server --config PATH | --build-info | --version | --help";

enum Command {
    Run(PathBuf),
    BuildInfo,
    Version,
    Help,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Command, String> {
    let mut command = None;
    while let Some(arg) = args.next() {
        let next = match arg.as_str() {
            "--build-info" => Command::BuildInfo,
            "--version" | "-V" => Command::Version,
            "--help" | "-h" => Command::Help,
            "--config" | "-c" => {
                let path = args.next().ok_or("--config needs a PATH")?;
                Command::Run(PathBuf::from(path))
            }
            other => match other.strip_prefix("--config=") {
                Some(path) if !path.is_empty() => Command::Run(PathBuf::from(path)),
                _ => return Err(format!("unexpected argument {other:?}")),
            },
        };
        if command.replace(next).is_some() {
            return Err("give exactly one of --config, --build-info, --version".into());
        }
    }
    command.ok_or_else(|| "missing --config PATH".into())
}

fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("demo-server: {message}");
    ExitCode::from(code)
}

fn main() -> ExitCode {
    let command = match parse_args(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) => return fail(2, &format!("{e} ({USAGE})")),
    };
    let config_path = match command {
        Command::Run(path) => path,
        Command::BuildInfo => {
            println!("target={}", env!("DEMO_BUILD_TARGET"));
            println!("target_features={}", env!("DEMO_BUILD_TARGET_FEATURES"));
            return ExitCode::SUCCESS;
        }
        Command::Version => {
            println!("demo-server {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Command::Help => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
    };
    let config = match Config::load(&config_path) {
        Ok(c) => c,
        Err(e) => return fail(2, &e),
    };
    let tls = match &config.tls {
        Some(t) if config.server.https.is_some() => match tls::server_config(&t.cert, &t.key) {
            Ok(c) => Some(c),
            Err(e) => return fail(2, &e),
        },
        _ => None,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.workers())
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(1, &format!("cannot start runtime: {e}")),
    };
    let app = {
        let _guard = runtime.enter();
        match server::App::new(&config) {
            Ok(app) => Arc::new(app),
            Err(e) => return fail(2, &e),
        }
    };

    let result = runtime.block_on(async {
        let signals = server::ShutdownSignals::new().map_err(|e| format!("cannot install signal handlers: {e}"))?;
        let listeners = server::Listeners::bind(&config, tls).await?;
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{}", listeners.banner());
        let _ = stdout.flush();
        drop(stdout);
        server::run(Arc::clone(&app), listeners, signals).await;
        Ok::<(), String>(())
    });
    // Connections still open after the grace period are dropped here.
    runtime.shutdown_timeout(Duration::from_millis(500));
    app.flush_logs();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(1, &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse(args: &[&str]) -> Result<Command, String> {
        parse_args(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn arguments() {
        assert!(matches!(parse(&["--config", "a.toml"]), Ok(Command::Run(p)) if p == Path::new("a.toml")));
        assert!(matches!(parse(&["--config=b.toml"]), Ok(Command::Run(p)) if p == Path::new("b.toml")));
        assert!(matches!(parse(&["--build-info"]), Ok(Command::BuildInfo)));
        assert!(matches!(parse(&["--version"]), Ok(Command::Version)));
        assert!(parse(&[]).is_err());
        assert!(parse(&["--config"]).is_err());
        assert!(parse(&["--config="]).is_err());
        assert!(parse(&["--bogus"]).is_err());
        assert!(parse(&["--version", "--build-info"]).is_err());
    }
}
