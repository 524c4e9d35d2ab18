//! `ratchet workflows`: declarative workflow definitions (the Serverless Workflow DSL) kept in
//! the database, which every worker loads when it starts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Subcommand;
use ratchet::workflow::{self, Known, Workflow};
use ratchet::{Store, Timestamp};

use ratchet_api::{Api, DeleteQuery, ShowQuery};

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
    /// Draw a workflow's graph as a standalone SVG: a definition file (`-` for standard
    /// input; no database needed), or with --instance an instance's run, from its history
    /// (Rust orchestrations too).
    Render {
        /// A definition file (YAML or JSON).
        #[arg(required_unless_present = "instance", conflicts_with = "instance")]
        file: Option<PathBuf>,
        /// Draw this instance's current execution instead, children inside their nodes.
        #[arg(long)]
        instance: Option<String>,
        /// Write it here (default: standard output).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Delete a stored definition: every version, or one with --version; print what was
    /// deleted. Refused while unfinished instances run on it, unless --force. Works with
    /// --server too.
    Delete {
        /// `namespace/name`.
        name: String,
        /// Only this `document.version`.
        #[arg(long)]
        version: Option<String>,
        /// Delete even while unfinished instances run on it: then only a worker that loaded
        /// it before runs them on; no other worker claims them.
        #[arg(long)]
        force: bool,
    },
}

/// `namespace/name` split in two.
fn split_name(name: &str) -> anyhow::Result<(&str, &str)> {
    name.split_once('/').ok_or_else(|| {
        anyhow::anyhow!("name a workflow as namespace/name, as `workflows list` shows it")
    })
}

/// Prints a deleted version.
fn deleted(name: &str, version: &str, revision: u64) {
    out!("deleted {name} {version} (revision {revision})");
}

/// `workflows delete` on a `ratchet server`, over its HTTP API.
/// The commands that go through the API: the same on the database and on a server.
pub(crate) async fn run_api(api: &dyn Api, cmd: WorkflowCommand) -> anyhow::Result<()> {
    match cmd {
        WorkflowCommand::List { json } => {
            let stored = api.workflows_list().await?;
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
                if json {
                    out!("{}", serde_json::to_string(&w)?);
                } else {
                    out!(
                        "{:<32} {:<12} {:>8}  {:<12}  {}",
                        w.name,
                        w.version,
                        w.revision,
                        w.hash.get(..12).unwrap_or(&w.hash),
                        w.created_at
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
            let (namespace, short) = split_name(&name)?;
            let w = api
                .workflows_show(namespace, short, &ShowQuery { version })
                .await?;
            let source = w.source.unwrap_or_default();
            let text = if canonical {
                Workflow::compile(&source)
                    .map_err(|e| anyhow::anyhow!("the stored definition no longer compiles: {e}"))?
                    .decompile()
            } else {
                source
            };
            print!("{text}");
            if !text.ends_with('\n') {
                out!();
            }
            Ok(())
        }
        WorkflowCommand::Delete {
            name,
            version,
            force,
        } => {
            let (namespace, short) = split_name(&name)?;
            let query = DeleteQuery { version, force };
            let gone = match api.workflows_delete(namespace, short, &query).await {
                Ok(gone) => gone,
                Err(e) if e.problem().is_some_and(|p| p.kind_name() == "workflow-in-use") => bail!(
                    "{e}\n  `ratchet instances list --name {name} --status Pending,Running,ContinuedAsNew` lists them; --force deletes anyway"
                ),
                Err(e) => return Err(e.into()),
            };
            for w in gone {
                deleted(&name, &w.version, u64::from(w.revision));
            }
            Ok(())
        }
        other => {
            bail!("{other:?} reads files or the database itself: it has no form through the API")
        }
    }
}

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

/// Draws a definition file's graph: what no database is needed for.
pub(crate) fn render_file(file: &Path, output: Option<&Path>) -> anyhow::Result<()> {
    let source = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin()).context("reading standard input")?
    } else {
        read(file)?
    };
    let workflow = Workflow::compile(&source).map_err(|e| anyhow::anyhow!(report(file, &e)))?;
    write_graph(&workflow.graph(), output)
}

/// Writes a graph as SVG to a file (saying so, with its figures) or to standard output.
fn write_graph(graph: &ratchet::graph::Graph, output: Option<&Path>) -> anyhow::Result<()> {
    let layout = ratchet::graph::layout(graph);
    let svg = ratchet::graph::svg(&layout);
    match output {
        Some(path) => {
            std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
            out!(
                "wrote {} ({} nodes, {} edges, {} crossings)",
                path.display(),
                layout.boxes.len(),
                layout.edges.len(),
                layout.crossings()
            );
        }
        None => print!("{svg}"),
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
                    Ok(a) => {
                        out!(
                            "{}: {} {} {}",
                            path.display(),
                            a.workflow.orchestration_name(),
                            a.workflow.version(),
                            if a.created {
                                format!("stored as revision {}", a.revision)
                            } else {
                                format!("unchanged (revision {})", a.revision)
                            }
                        );
                        let client = ratchet::Client::new(store.clone());
                        match workflow::sync_schedule(&client, &a.workflow).await? {
                            workflow::ScheduleSync::Created(s) => {
                                out!("  schedule {} created: {}", s.name, s.spec)
                            }
                            workflow::ScheduleSync::Updated(s) => {
                                out!("  schedule {} now {}", s.name, s.spec)
                            }
                            workflow::ScheduleSync::Trigger {
                                instance,
                                started: true,
                            } => out!("  started {instance}, which starts it on its events"),
                            _ => {}
                        }
                    }
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
        WorkflowCommand::Render {
            file,
            instance,
            output,
        } => match (file, instance) {
            (Some(file), _) => render_file(&file, output.as_deref()),
            (None, Some(id)) => {
                let Some(graph) = ratchet::graph::instance(store.as_ref(), &id, None).await? else {
                    bail!("no instance {id}");
                };
                write_graph(&graph, output.as_deref())
            }
            (None, None) => bail!("render what? Give a definition file or --instance ID"),
        },
        WorkflowCommand::List { .. }
        | WorkflowCommand::Show { .. }
        | WorkflowCommand::Delete { .. } => {
            run_api(
                &ratchet_api::LocalApi::new(ratchet::Client::new(store)),
                cmd,
            )
            .await
        }
    }
}
