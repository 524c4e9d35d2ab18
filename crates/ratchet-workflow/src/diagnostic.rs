//! What the compiler reports: every error at once, each at its line and column.

/// One error in a definition, where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    /// Line in the source, from 1 (0 when the error has no place, as for an empty file).
    pub line: usize,
    /// Column in the source, from 1.
    pub column: usize,
    /// What is wrong, naming the task or construct.
    pub message: String,
}

impl CompileError {
    /// An error at `line` and `column` saying `message`, as a message quoting input is shown
    /// ([`ratchet_core::limits::shown_message`]): a name holding a right-to-left override
    /// shows its escape, and a megabyte name its start and its length.
    pub fn new(line: usize, column: usize, message: impl AsRef<str>) -> CompileError {
        CompileError {
            line,
            column,
            message: ratchet_core::limits::shown_message(message.as_ref()),
        }
    }
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// Every error the compiler found in a definition, in source order.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct CompileErrors(pub Vec<CompileError>);

impl std::fmt::Display for CompileErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "{n} error{} in the workflow",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.0 {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}
