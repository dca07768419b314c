//! Column alignment as kubectl does it: Go's `text/tabwriter` (with the `RememberWidths` flag
//! of kubectl's fork, `github.com/liggitt/tabwriter`), so tables, `describe` and `rollout
//! history` line up exactly as kubectl's do.
//!
//! Text is cells ended by `\t`; the text after a line's last tab is not a cell and is never
//! padded. A *column block* is a run of consecutive lines that all have a cell in that column;
//! each block gets its own width: the widest cell plus `padding`, at least `min_width`.
//!
//! ```text
//!   "NAME\tREADY\tAGE\n"             NAME    READY   AGE        min_width 6, padding 3
//!   "nginx\t3/3\t5s\n"        ──▶    nginx   3/3     5s         (kubectl get)
//!
//!   "Name:\tweb\n"                   Name:      web            min_width 0, padding 2
//!   "Selector:\tapp=web\n"    ──▶    Selector:  app=web        (kubectl describe)
//!   "Pod Template:\n"                Pod Template:             (no tab: ends the block)
//! ```
//!
//! With `remember_widths`, a column never gets narrower than it was in an earlier
//! [`TabWriter::format`] call: `get -w` prints one row at a time and stays aligned.

/// Go's `tabwriter.Writer` state that outlives one flush (the remembered widths).
#[derive(Debug, Clone)]
pub struct TabWriter {
    min_width: usize,
    padding: usize,
    remember_widths: bool,
    max_widths: Vec<usize>,
}

impl TabWriter {
    /// kubectl's table writer (`printers.GetNewTabWriter`: min width 6, padding 3,
    /// `RememberWidths`).
    pub fn table() -> TabWriter {
        TabWriter {
            min_width: 6,
            padding: 3,
            remember_widths: true,
            max_widths: Vec::new(),
        }
    }

    /// kubectl's `describe`/`rollout history` writer (`tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)`).
    pub fn describe() -> TabWriter {
        TabWriter {
            min_width: 0,
            padding: 2,
            remember_widths: false,
            max_widths: Vec::new(),
        }
    }

    /// Aligns `text` (one flush of Go's writer).
    pub fn format(&mut self, text: &str) -> String {
        let lines: Vec<Vec<&str>> = text
            .split_inclusive('\n')
            .map(|l| l.strip_suffix('\n').unwrap_or(l).split('\t').collect())
            .collect();
        let mut out = String::with_capacity(text.len() * 2);
        let mut widths = Vec::new();
        self.format_block(&mut out, &mut widths, &lines, 0, lines.len());
        if !text.ends_with('\n') && out.ends_with('\n') {
            out.pop();
        }
        out
    }

    /// Go's `Writer.format`: finds the blocks of column `widths.len()` within
    /// `lines[line0..line1]`, sizes each and recurses into the next column.
    fn format_block(
        &mut self,
        out: &mut String,
        widths: &mut Vec<usize>,
        lines: &[Vec<&str>],
        mut line0: usize,
        line1: usize,
    ) {
        let column = widths.len();
        let mut this = line0;
        while this < line1 {
            if column + 1 >= lines[this].len() {
                this += 1;
                continue;
            }
            write_lines(out, widths, &lines[line0..this]);
            line0 = this;
            let mut width = self.min_width;
            while this < line1 && column + 1 < lines[this].len() {
                width = width.max(lines[this][column].chars().count() + self.padding);
                this += 1;
            }
            if self.remember_widths {
                match self.max_widths.get_mut(column) {
                    Some(max) => {
                        width = width.max(*max);
                        *max = width;
                    }
                    None => {
                        self.max_widths.resize(column, 0);
                        self.max_widths.push(width);
                    }
                }
            }
            widths.push(width);
            self.format_block(out, widths, lines, line0, this);
            widths.pop();
            line0 = this;
        }
        write_lines(out, widths, &lines[line0..line1]);
    }
}

/// Writes lines, padding the cells that have a width.
fn write_lines(out: &mut String, widths: &[usize], lines: &[Vec<&str>]) {
    for line in lines {
        for (j, cell) in line.iter().enumerate() {
            out.push_str(cell);
            if j + 1 < line.len()
                && let Some(&width) = widths.get(j)
            {
                let used = cell.chars().count();
                out.extend(std::iter::repeat_n(' ', width.saturating_sub(used)));
            }
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_columns_as_kubectl_get() {
        let out = TabWriter::table().format("NAME\tREADY\tUP-TO-DATE\tAGE\nnginx\t3/3\t3\t5s\n");
        assert_eq!(
            out,
            "NAME    READY   UP-TO-DATE   AGE\nnginx   3/3     3            5s\n"
        );
    }

    #[test]
    fn blocks_end_at_lines_without_the_column() {
        let text = "Name:\tweb\nSelector:\tapp=web\nPod Template:\n  Labels:\tapp=web\nConditions:\n  Type\tStatus\tReason\n  ----\t------\t------\nOldReplicaSets:\t<none>\n";
        let out = TabWriter::describe().format(text);
        assert_eq!(
            out,
            "Name:      web\n\
             Selector:  app=web\n\
             Pod Template:\n  \
             Labels:  app=web\n\
             Conditions:\n  \
             Type           Status  Reason\n  \
             ----           ------  ------\n\
             OldReplicaSets:  <none>\n"
        );
    }

    #[test]
    fn remembered_widths_keep_watch_rows_aligned() {
        let mut w = TabWriter::table();
        assert_eq!(
            w.format("NAME\tSTATUS\tAGE\nlong-name-pod\tPending\t1s\n"),
            "NAME            STATUS    AGE\nlong-name-pod   Pending   1s\n"
        );
        assert_eq!(
            w.format("p\tRunning\t2s\n"),
            "p               Running   2s\n"
        );
    }

    #[test]
    fn the_last_cell_is_not_padded_and_unicode_counts_chars() {
        assert_eq!(TabWriter::describe().format("a\tb\n"), "a  b\n");
        assert_eq!(
            TabWriter::describe().format("é\tx\nab\ty\n"),
            "é   x\nab  y\n"
        );
        assert_eq!(
            TabWriter::describe().format("no newline\tx"),
            "no newline  x"
        );
    }
}
