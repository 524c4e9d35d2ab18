//! A deterministic generator of workflow definitions of any size, for the layout corpus and
//! the layout timing example.

pub(crate) fn document(name: &str, body: &str) -> String {
    format!("document:\n  dsl: '1.0.0'\n  namespace: corpus\n  name: {name}\n  version: '1.0.0'\n{body}")
}

/// A small deterministic generator of definitions (a linear congruential generator: the
/// corpus is the same on every run).
struct Gen {
    state: u64,
    activities: usize,
}

impl Gen {
    fn next(&mut self, below: usize) -> usize {
        self.state = self
            .state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.state >> 33) % below.max(1) as u64) as usize
    }

    /// A list of tasks using about `budget` steps, at `indent`, its names `{prefix}{i}`.
    fn list(&mut self, out: &mut String, budget: usize, indent: usize, prefix: &str, depth: usize) {
        // Plan the list first, so switch cases can jump forward as well as back.
        let mut plan: Vec<(usize, usize)> = Vec::new(); // (kind, inner budget)
        let mut left = budget.max(1);
        while left > 0 {
            let composite = depth < 3 && left > 3 && self.next(10) < 3;
            if composite {
                let inner = 2 + self.next((left - 1).min(12) - 1);
                plan.push((100 + self.next(4), inner));
                left -= (inner + 1).min(left);
            } else {
                plan.push((self.next(7), 0));
                left -= 1;
            }
        }
        let pad = " ".repeat(indent);
        let count = plan.len();
        for (i, (kind, inner)) in plan.into_iter().enumerate() {
            let name = format!("{prefix}{i}");
            out.push_str(&format!("{pad}- {name}:\n"));
            let p = " ".repeat(indent + 4);
            match kind {
                0 | 1 => {
                    self.activities += 1;
                    out.push_str(&format!("{p}call: act{}\n", self.activities % 9));
                }
                2 => out.push_str(&format!("{p}set:\n{p}  step: {i}\n")),
                3 => out.push_str(&format!("{p}wait: PT{}S\n", 1 + self.next(30))),
                4 => out.push_str(&format!(
                    "{p}listen:\n{p}  to:\n{p}    one:\n{p}      with:\n{p}        type: go{i}\n{p}timeout:\n{p}  after:\n{p}    minutes: 5\n"
                )),
                5 if count > 1 => {
                    let mut target = self.next(count);
                    if target == i {
                        target = (i + 1) % count;
                    }
                    let exit = ["exit", "end"][self.next(2)];
                    out.push_str(&format!(
                        "{p}switch:\n{p}  - jump:\n{p}      when: ${{ .n > {i} }}\n{p}      then: {prefix}{target}\n{p}  - leave:\n{p}      when: ${{ .stop }}\n{p}      then: {exit}\n{p}  - otherwise:\n{p}      then: continue\n"
                    ));
                }
                5 | 6 => out.push_str(&format!(
                    "{p}emit:\n{p}  event:\n{p}    with:\n{p}      type: step.done\n{p}      source: https://corpus.example\n"
                )),
                100 => {
                    out.push_str(&format!("{p}do:\n"));
                    self.list(out, inner, indent + 6, &format!("{name}_"), depth + 1);
                }
                101 => {
                    out.push_str(&format!("{p}for:\n{p}  each: item\n{p}  in: ${{ .items }}\n{p}do:\n"));
                    self.list(out, inner, indent + 6, &format!("{name}_"), depth + 1);
                }
                102 => {
                    let branches = 2 + self.next(3);
                    let compete = self.next(4) == 0;
                    out.push_str(&format!("{p}fork:\n{p}  compete: {compete}\n{p}  branches:\n"));
                    let share = (inner / branches).max(1);
                    for b in 0..branches {
                        let q = " ".repeat(indent + 12);
                        out.push_str(&format!("{p}    - {name}_b{b}:\n{q}do:\n"));
                        self.list(out, share, indent + 14, &format!("{name}_b{b}_"), depth + 1);
                    }
                }
                _ => {
                    out.push_str(&format!("{p}try:\n"));
                    let body = (inner / 2).max(1);
                    self.list(out, body, indent + 6, &format!("{name}_t"), depth + 1);
                    out.push_str(&format!("{p}catch:\n{p}  as: failure\n{p}  do:\n"));
                    self.list(out, inner - body.min(inner), indent + 8, &format!("{name}_c"), depth + 1);
                }
            }
        }
    }
}

pub(crate) fn generated(seed: u64, steps: usize) -> String {
    let mut gen = Gen {
        state: seed,
        activities: 0,
    };
    let mut body = String::from("do:\n");
    gen.list(&mut body, steps, 2, "s", 0);
    document(&format!("generated-{seed}-{steps}"), &body)
}
