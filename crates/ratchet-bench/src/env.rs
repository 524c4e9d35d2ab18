//! Where a run runs: a fresh SQLite file, or a fresh schema in PostgreSQL (reached through the
//! delaying proxy when `--rtt` is set), and the statistics gathered around it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ratchet::{PostgresConfig, PostgresStore, SqliteStore, Store};

use super::measure::Report;
use super::pgstats::{PgReport, PgStats};
use super::proxy::Proxy;

/// Which store a run uses.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    /// A fresh SQLite file in a temporary directory.
    Sqlite,
    /// A fresh schema in the PostgreSQL database of --database-url.
    Postgres,
}

/// The flags every scenario takes.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct Common {
    /// sqlite: a fresh file; postgres: a fresh schema in --database-url (or DATABASE_URL).
    #[arg(long, value_enum, default_value_t = Backend::Sqlite)]
    pub(crate) backend: Backend,
    /// Add this round trip, in milliseconds, to every database connection: they go through a
    /// proxy that delays each direction by half of it (postgres only).
    #[arg(long, default_value_t = 0)]
    pub(crate) rtt: u64,
    /// Write every figure, the parameters and the machine to this JSON file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Show no progress bar.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Keep the database (file or schema) after the run.
    #[arg(long)]
    pub(crate) keep: bool,
}

/// A prepared database for one run.
pub(crate) struct BenchEnv {
    pub(crate) common: Common,
    sqlite: Option<(PathBuf, tempfile::TempDir)>,
    /// (URL the stores use, URL straight to the server, schema)
    postgres: Option<(String, String, String)>,
    _proxy: Option<Proxy>,
    pub(crate) measured_rtt_ms: Option<f64>,
    stats: Option<PgStats>,
}

impl BenchEnv {
    pub(crate) async fn open(common: &Common, database_url: Option<&str>) -> anyhow::Result<Self> {
        let mut env = Self {
            common: common.clone(),
            sqlite: None,
            postgres: None,
            _proxy: None,
            measured_rtt_ms: None,
            stats: None,
        };
        match common.backend {
            Backend::Sqlite => {
                if common.rtt > 0 {
                    bail!("--rtt needs --backend postgres: SQLite is a file in this process");
                }
                let dir = tempfile::tempdir().context("a temporary directory for SQLite")?;
                env.sqlite = Some((dir.path().join("bench.db"), dir));
            }
            Backend::Postgres => {
                let url = database_url
                    .filter(|u| !u.is_empty())
                    .context("--backend postgres needs --database-url (or DATABASE_URL)")?;
                let schema = format!("ratchet_bench_{}", std::process::id());
                let mut store_url = url.to_string();
                if common.rtt > 0 {
                    let upstream = upstream_addr(url).await?;
                    let proxy = Proxy::start(upstream, Duration::from_millis(common.rtt)).await?;
                    store_url = with_host(url, &proxy.addr().to_string())?;
                    env._proxy = Some(proxy);
                    env.measured_rtt_ms = Some(measure_rtt(&store_url).await?);
                }
                super::pgstats::checkpoint(url).await?;
                env.postgres = Some((store_url, url.to_string(), schema));
            }
        }
        Ok(env)
    }

    pub(crate) fn backend_name(&self) -> &'static str {
        match self.common.backend {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }

    /// A new store on the run's database, with connections of its own (a worker process's).
    pub(crate) async fn store(&self) -> anyhow::Result<Arc<dyn Store>> {
        if let Some((path, _)) = &self.sqlite {
            return Ok(Arc::new(SqliteStore::open(path).await?));
        }
        let Some((url, _, schema)) = &self.postgres else {
            bail!("no database");
        };
        let config = PostgresConfig {
            schema: schema.clone(),
            pool_size: 16,
            ..PostgresConfig::default()
        };
        Ok(Arc::new(PostgresStore::connect_with(url, config).await?))
    }

    /// Starts gathering PostgreSQL statistics (a no-op on SQLite).
    pub(crate) async fn begin_stats(&mut self) -> anyhow::Result<()> {
        if let Some((_, direct, schema)) = &self.postgres {
            self.stats = Some(PgStats::begin(direct, schema).await?);
        }
        Ok(())
    }

    /// Ends the run: PostgreSQL statistics into the report (call once every store of the run
    /// is dropped, so their connections flushed their statistics), then the database goes
    /// unless `--keep`.
    pub(crate) async fn finish(mut self, report: &mut Report) -> anyhow::Result<()> {
        self.describe(report);
        report.postgres = self.end_stats(report.units).await?;
        self.close().await
    }

    /// Names the backend and the round trip in the report.
    pub(crate) fn describe(&self, report: &mut Report) {
        report.backend = self.backend_name().into();
        report.rtt_ms = self.common.rtt;
        report.measured_rtt_ms = self.measured_rtt_ms;
    }

    /// The PostgreSQL statistics since [`BenchEnv::begin_stats`] (`None` on SQLite); call
    /// once the stores of the measured part are dropped.
    pub(crate) async fn end_stats(&mut self, units: u64) -> anyhow::Result<Option<PgReport>> {
        match self.stats.take() {
            Some(stats) => Ok(Some(stats.end(units).await?)),
            None => Ok(None),
        }
    }

    /// The bytes the run's database takes: the SQLite file with its write-ahead log, or the
    /// tables and indexes of the PostgreSQL schema.
    pub(crate) async fn database_bytes(&self) -> anyhow::Result<u64> {
        if let Some((path, _)) = &self.sqlite {
            let size = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
            let mut wal = path.clone().into_os_string();
            wal.push("-wal");
            return Ok(size(path) + size(std::path::Path::new(&wal)));
        }
        match &self.postgres {
            Some((_, direct, schema)) => super::pgstats::schema_bytes(direct, schema).await,
            None => Ok(0),
        }
    }

    /// Holds a snapshot until the returned session is dropped, as a long report, a backup or a
    /// forgotten `psql` in a transaction would: a REPEATABLE READ transaction that has read,
    /// so nothing deleted after it can be vacuumed away. PostgreSQL only.
    pub(crate) async fn hold_snapshot(&self) -> anyhow::Result<tokio_postgres::Client> {
        let Some((_, direct, _)) = &self.postgres else {
            bail!("--hold-snapshot needs --backend postgres");
        };
        super::pgstats::hold_snapshot(direct).await
    }

    /// The URL straight to the server and the run's schema, on PostgreSQL.
    pub(crate) fn postgres_direct(&self) -> Option<(&str, &str)> {
        self.postgres
            .as_ref()
            .map(|(_, direct, schema)| (direct.as_str(), schema.as_str()))
    }

    /// Drops the database unless `--keep`.
    pub(crate) async fn close(mut self) -> anyhow::Result<()> {
        if let (Some((_, direct, schema)), false) = (&self.postgres, self.common.keep) {
            super::pgstats::drop_schema(direct, schema).await?;
        }
        if let (Some((path, dir)), true) = (self.sqlite.take(), self.common.keep) {
            let kept = dir.keep();
            tracing::info!(path = %path.display(), dir = %kept.display(), "kept the SQLite file");
        }
        Ok(())
    }
}

/// The server's address from a database URL.
async fn upstream_addr(url: &str) -> anyhow::Result<std::net::SocketAddr> {
    let config: tokio_postgres::Config = url.parse().context("database URL")?;
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        _ => bail!("--rtt needs a TCP host in the database URL"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let mut addrs = tokio::net::lookup_host((host.as_str(), port)).await?;
    addrs.next().with_context(|| format!("resolving {host}"))
}

/// `url` with its host and port replaced by `addr`.
fn with_host(url: &str, addr: &str) -> anyhow::Result<String> {
    let (scheme, rest) = url.split_once("://").context("database URL without ://")?;
    let (user, rest) = match rest.split_once('@') {
        Some((user, rest)) => (format!("{user}@"), rest),
        None => (String::new(), rest),
    };
    let tail = rest.find(['/', '?']).map_or("", |i| &rest[i..]);
    Ok(format!("{scheme}://{user}{addr}{tail}"))
}

/// The median of five `SELECT 1` round trips through `url`, in milliseconds.
async fn measure_rtt(url: &str) -> anyhow::Result<f64> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("connecting through the proxy")?;
    tokio::spawn(connection);
    let statement = client.prepare("SELECT 1").await?;
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        client.query_one(&statement, &[]).await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_replaces_only_host_and_port() {
        let to = "127.0.0.1:9";
        assert_eq!(
            with_host("postgres://u:p@db.example:5433/app?sslmode=disable", to).ok(),
            Some("postgres://u:p@127.0.0.1:9/app?sslmode=disable".into())
        );
        assert_eq!(
            with_host("postgresql://localhost/app", to).ok(),
            Some("postgresql://127.0.0.1:9/app".into())
        );
        assert_eq!(
            with_host("postgres://u@h", to).ok(),
            Some("postgres://u@127.0.0.1:9".into())
        );
    }
}
