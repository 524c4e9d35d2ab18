//! `ratchet workflows`: declarative workflow definitions (the Serverless Workflow DSL) kept in
//! the database, which every worker loads when it starts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Subcommand;
use ratchet::workflow::{self, Known, Workflow};
use ratchet::{Store, Timestamp};

use crate::input::rfc3339;

#[derive(Subcommand, Debug)]
pub(crate) enum WorkflowCommand {
    /// Check definitions and store each new version (a file, or every .yaml, .yml and .json
    /// file of a directory); print what changed. Workers load them when they start.
    Apply {
        /// Files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Check definitions without storing anything (no database needed): every error, each
    /// with its file, line and column.
    Validate {
        /// Files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// List stored definitions: each version with its revision.
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Print a stored definition as it was applied (the newest version unless --version).
    Show {
        /// `namespace/name`.
        name: String,
        /// This `document.version`.
        #[arg(long)]
        version: Option<String>,
        /// Print it as canonical YAML (what the decompiler writes, which compiles to the same
        /// workflow) instead of as it was applied.
        #[arg(long)]
        canonical: bool,
    },
}

/// The definition files `paths` name: files as given, directories' .yaml, .yml and .json
/// files in name order.
fn files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("reading {}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
                })
                .collect();
            found.sort();
            out.extend(found);
        } else {
            out.push(path.clone());
        }
    }
    if out.is_empty() {
        bail!("no definition files (.yaml, .yml, .json) in {paths:?}");
    }
    Ok(out)
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Every error of `source`, as `file:line:column: message` lines.
fn report(path: &Path, errors: &workflow::CompileErrors) -> String {
    errors
        .0
        .iter()
        .map(|e| format!("{}:{}:{}: {}", path.display(), e.line, e.column, e.message))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks definitions against no registry: what no database is needed for.
pub(crate) fn validate(paths: &[PathBuf]) -> anyhow::Result<()> {
    let mut failed = 0;
    for path in files(paths)? {
        match Workflow::compile(&read(&path)?) {
            Ok(w) => out!(
                "{}: ok ({} {})",
                path.display(),
                w.orchestration_name(),
                w.version()
            ),
            Err(errors) => {
                failed += 1;
                eprintln!("{}", report(&path, &errors));
            }
        }
    }
    if failed > 0 {
        bail!("{failed} definition(s) with errors");
    }
    Ok(())
}

/// What the fleet runs, when some worker said so: names to check definitions against.
async fn known(store: &dyn Store) -> anyhow::Result<Known> {
    let workers = store.worker_list().await?;
    if workers.is_empty() {
        return Ok(Known::default());
    }
    let mut names = ratchet::RegisteredNames::default();
    for w in workers {
        names.activities.extend(w.about.activities);
        names.orchestrations.extend(w.about.orchestrations);
    }
    Ok(Known::from_names(&names))
}

pub(crate) async fn run(store: Arc<dyn Store>, cmd: WorkflowCommand) -> anyhow::Result<()> {
    match cmd {
        WorkflowCommand::Validate { paths } => validate(&paths),
        WorkflowCommand::Apply { paths } => {
            let known = known(store.as_ref()).await?;
            let mut failed = 0;
            for path in files(&paths)? {
                let source = read(&path)?;
                match workflow::apply(store.as_ref(), &source, &known, Timestamp::now()).await {
                    Ok(a) => out!(
                        "{}: {} {} {}",
                        path.display(),
                        a.workflow.orchestration_name(),
                        a.workflow.version(),
                        if a.created {
                            format!("stored as revision {}", a.revision)
                        } else {
                            format!("unchanged (revision {})", a.revision)
                        }
                    ),
                    Err(workflow::ApplyError::Compile(errors)) => {
                        failed += 1;
                        eprintln!("{}", report(&path, &errors));
                    }
                    Err(e) => {
                        failed += 1;
                        eprintln!("{}: {e}", path.display());
                    }
                }
            }
            if failed > 0 {
                bail!("{failed} definition(s) not applied");
            }
            Ok(())
        }
        WorkflowCommand::List { json } => {
            let stored = store.workflow_list(None, None).await?;
            if !json {
                out!(
                    "{:<32} {:<12} {:>8}  {:<12}  created",
                    "workflow",
                    "version",
                    "revision",
                    "hash"
                );
            }
            for w in stored {
                let name = workflow::orchestration_name(&w.namespace, &w.name);
                if json {
                    out!(
                        "{}",
                        serde_json::json!({"name": name, "namespace": w.namespace,
                            "workflow": w.name, "version": w.version, "revision": w.revision,
                            "hash": w.hash, "created_at": rfc3339(w.created_at)})
                    );
                } else {
                    out!(
                        "{:<32} {:<12} {:>8}  {:<12}  {}",
                        name,
                        w.version,
                        w.revision,
                        w.hash.get(..12).unwrap_or(&w.hash),
                        rfc3339(w.created_at)
                    );
                }
            }
            Ok(())
        }
        WorkflowCommand::Show {
            name,
            version,
            canonical,
        } => {
            let Some((namespace, short)) = name.split_once('/') else {
                bail!("name a workflow as namespace/name, as `workflows list` shows it");
            };
            let stored = store.workflow_list(Some(namespace), Some(short)).await?;
            let found = match &version {
                Some(v) => stored.into_iter().find(|w| &w.version == v),
                None => stored.into_iter().last(),
            };
            let Some(w) = found else {
                bail!(
                    "no workflow {name}{} is stored",
                    version.map(|v| format!(" version {v}")).unwrap_or_default()
                );
            };
            let text = if canonical {
                Workflow::compile(&w.source)
                    .map_err(|e| anyhow::anyhow!("the stored definition no longer compiles: {e}"))?
                    .decompile()
            } else {
                w.source
            };
            print!("{text}");
            if !text.ends_with('\n') {
                out!();
            }
            Ok(())
        }
    }
}
