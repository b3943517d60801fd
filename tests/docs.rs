//! The documentation against the code, without a server: each command's reference section in
//! `docs/commands/*.md` opens with the syntax and summary its command table gives (the tables
//! come from `tests/table/`, the one place that names their files), the README lists every
//! command in one line with its table's summary and a link to its section, no page names a
//! command the tables lack, every relative link of the README and `docs/` leads to a file and
//! heading that exist, and the README stays a front door of at most 250 lines. One test asks
//! a server: every setting and `INFO bf` field it reports is documented.

use crate::common::{Exec, Server};
use crate::table::{self, spec::ArgKind, spec::CommandSpec};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most lines the README may have: the reference lives in `docs/`.
const README_MAX_LINES: usize = 250;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The Markdown files of a folder, recursively, sorted.
fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            out.extend(markdown_under(&path));
        } else if path.extension().is_some_and(|x| x == "md") {
            out.push(path);
        }
    }
    out
}

/// The README and every page under `docs/`.
fn all_pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    pages.extend(markdown_under(&root().join("docs")));
    pages
}

/// A command's syntax as its table's arguments spell it, in the convention of Redis's own
/// documentation: `TOKEN name` for an option's value, `[...]` around what is optional,
/// `name [name ...]` for what repeats, `a | b` between choices.
fn syntax(spec: &CommandSpec) -> String {
    fn one(arg: &table::spec::Arg) -> String {
        let body = match arg.kind {
            ArgKind::PureToken => arg.token.expect("a bare word has a token").to_string(),
            ArgKind::OneOf => arg.subargs.iter().map(one).collect::<Vec<_>>().join(" | "),
            _ => {
                let value = if arg.multiple {
                    format!("{0} [{0} ...]", arg.name)
                } else {
                    arg.name.to_string()
                };
                match arg.token {
                    Some(token) => format!("{token} {value}"),
                    None => value,
                }
            }
        };
        if arg.optional {
            format!("[{body}]")
        } else if arg.kind == ArgKind::OneOf {
            format!("<{body}>")
        } else {
            body
        }
    }
    std::iter::once(spec.name.to_ascii_uppercase())
        .chain(spec.args.iter().map(one))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a word is spelled like a command of a module structure (`BF.ADD`,
/// `CF.LOADCHUNK`, `TOPK.ADD`).
fn looks_like_command(word: &str) -> bool {
    match word.split_once('.') {
        Some((structure, name)) => {
            structure.len() >= 2
                && structure.bytes().all(|b| b.is_ascii_uppercase())
                && !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_uppercase())
        }
        None => false,
    }
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// A page's lines outside fenced code blocks, with their line numbers (from 1).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// A page's headings, in order: (level, text).
fn headings(text: &str) -> Vec<(usize, &str)> {
    prose_lines(text)
        .into_iter()
        .filter_map(|(_, line)| {
            let level = line.bytes().take_while(|&b| b == b'#').count();
            let rest = line[level..].strip_prefix(' ')?;
            (level > 0).then_some((level, rest.trim()))
        })
        .collect()
}

/// A page's anchors, as GitHub numbers repeated headings (`name`, `name-1`, ...).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, heading) in headings(text) {
        let base = slug(heading);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// One command's section of a reference page: `## NAME`, then the syntax line in backticks,
/// then the summary.
struct Section {
    page: PathBuf,
    syntax: String,
    summary: String,
}

/// Every section of `docs/commands/*.md` whose heading is a command name, by name; a command
/// with two sections is an error.
fn sections() -> BTreeMap<String, Section> {
    let mut out = BTreeMap::new();
    for page in markdown_under(&root().join("docs/commands")) {
        let text = read(&page);
        let lines = prose_lines(&text);
        for (at, &(_, line)) in lines.iter().enumerate() {
            let Some(name) = line.strip_prefix("## ") else {
                continue;
            };
            let name = name.trim();
            if !looks_like_command(name) {
                continue;
            }
            let mut next = lines[at + 1..]
                .iter()
                .map(|(_, l)| l.trim())
                .filter(|l| !l.is_empty());
            let section = Section {
                page: page.clone(),
                syntax: next.next().unwrap_or_default().to_string(),
                summary: next.next().unwrap_or_default().to_string(),
            };
            if let Some(first) = out.insert(name.to_string(), section) {
                panic!(
                    "{name} has two sections: {} and {}",
                    first.page.display(),
                    page.display()
                );
            }
        }
    }
    out
}

/// How a section shows a table's summary: as a sentence.
fn sentence(summary: &str) -> String {
    format!("{summary}.")
}

#[test]
fn every_command_has_a_section_opening_with_its_tables_syntax_and_summary() {
    let sections = sections();
    let mut wrong = Vec::new();
    for spec in table::commands() {
        let name = spec.name.to_ascii_uppercase();
        let Some(section) = sections.get(&name) else {
            wrong.push(format!("{name}: no `## {name}` section in docs/commands/"));
            continue;
        };
        let want_syntax = format!("`{}`", syntax(spec));
        if section.syntax != want_syntax {
            wrong.push(format!(
                "{name} ({}): syntax line\n  doc:   {}\n  table: {want_syntax}",
                section.page.display(),
                section.syntax
            ));
        }
        if section.summary != sentence(spec.summary) {
            wrong.push(format!(
                "{name} ({}): summary\n  doc:   {}\n  table: {}",
                section.page.display(),
                section.summary,
                sentence(spec.summary)
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs differ from the command tables:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_page_names_a_command_the_tables_lack() {
    let known: BTreeSet<String> = table::commands()
        .map(|spec| spec.name.to_ascii_uppercase())
        .collect();
    let mut unknown = Vec::new();
    for page in all_pages() {
        let text = read(&page);
        for (line_no, line) in text.lines().enumerate() {
            let words = line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'));
            for word in words {
                let word = word.trim_end_matches('.');
                if looks_like_command(word) && !known.contains(word) {
                    unknown.push(format!("{}:{}: {word}", page.display(), line_no + 1));
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "commands no table has:\n{}",
        unknown.join("\n")
    );
}

#[test]
fn the_readme_lists_every_command_with_its_summary_and_a_link_to_its_section() {
    let readme_path = root().join("README.md");
    let readme = read(&readme_path);
    let sections = sections();
    let mut wrong = Vec::new();
    for spec in table::commands() {
        let name = spec.name.to_ascii_uppercase();
        let prefix = format!("- [`{name}`](");
        let lines: Vec<&str> = readme.lines().filter(|l| l.starts_with(&prefix)).collect();
        let [line] = lines[..] else {
            wrong.push(format!(
                "{name}: {} README lines start with {prefix}",
                lines.len()
            ));
            continue;
        };
        let Some((target, summary)) = line[prefix.len()..].split_once("): ") else {
            wrong.push(format!("{name}: not `{prefix}<link>): <summary>`: {line}"));
            continue;
        };
        if summary != sentence(spec.summary) {
            wrong.push(format!(
                "{name}: README summary\n  readme: {summary}\n  table:  {}",
                sentence(spec.summary)
            ));
        }
        let Some(section) = sections.get(&name) else {
            continue; // reported by the sections' test
        };
        let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
        let want_file = section
            .page
            .strip_prefix(root())
            .expect("a page under the root");
        if Path::new(file) != want_file || anchor != slug(&name) {
            wrong.push(format!(
                "{name}: README links to {target}, its section is {}#{}",
                want_file.display(),
                slug(&name)
            ));
        }
    }
    let listed = readme
        .lines()
        .filter(|l| {
            l.starts_with("- [`") && l[4..].split('`').next().is_some_and(looks_like_command)
        })
        .count();
    if listed != table::commands().count() {
        wrong.push(format!(
            "the README lists {listed} commands, the tables have {}",
            table::commands().count()
        ));
    }
    assert!(
        wrong.is_empty(),
        "README's command list:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_relative_link_of_the_readme_and_docs_leads_to_a_page_and_heading_that_exist() {
    let mut broken = Vec::new();
    for page in all_pages() {
        let text = read(&page);
        let dir = page.parent().expect("a page has a folder");
        for (line_no, line) in prose_lines(&text) {
            // Code spans may hold brackets; link texts may hold code spans.
            let plain: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
            let mut rest = plain.as_str();
            while let Some(at) = rest.find("](") {
                rest = &rest[at + 2..];
                let Some(end) = rest.find(')') else { break };
                let target = &rest[..end];
                rest = &rest[end..];
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
                let file = if file.is_empty() {
                    page.clone()
                } else {
                    dir.join(file)
                };
                let at = format!("{}:{line_no}: {target}", page.display());
                if !file.exists() {
                    broken.push(format!("{at}: no such file"));
                } else if !anchor.is_empty()
                    && file.extension().is_some_and(|x| x == "md")
                    && !anchors(&read(&file)).contains(anchor)
                {
                    broken.push(format!("{at}: no such heading"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_a_front_door_of_at_most_250_lines() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move reference text to docs/"
    );
}

#[test]
fn the_syntax_renderer_spells_options_repeats_and_choices_as_redis_does() {
    let spec = |name| {
        table::commands()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} is in a table"))
    };
    assert_eq!(
        syntax(spec("bf.insert")),
        "BF.INSERT key [CAPACITY capacity] [ERROR error] [EXPANSION expansion] [NOCREATE] \
         [NONSCALING] [WINDOW window] [SLICES slices] ITEMS item [item ...]"
    );
    assert_eq!(
        syntax(spec("bf.merge")),
        "BF.MERGE destination source [source ...]"
    );
    assert!(syntax(spec("cf.info")).starts_with("CF.INFO key [SIZE | BUCKETS | "));
    assert_eq!(slug("BF.WINDOWADVANCE"), "bfwindowadvance");
    assert_eq!(
        slug("A false-positive rate of your choosing (ERROR)"),
        "a-false-positive-rate-of-your-choosing-error"
    );
}

/// The README and every page under `docs/` in one text.
fn all_text() -> String {
    all_pages()
        .iter()
        .map(|p| read(p))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_setting_and_info_field_the_server_reports_is_documented() {
    let s = Server::start();
    let mut con = s.conn();
    let configuration = read(&root().join("docs/configuration.md"));
    let text = all_text();
    let mut missing = Vec::new();
    // CONFIG GET * answers names and values in turn; Redis 7 names module settings
    // `bf.<setting>`, Redis 8 also without the prefix.
    let config: Vec<String> = con.q(&cmd!("CONFIG", "GET", "*"));
    let settings: BTreeSet<&str> = config
        .iter()
        .step_by(2)
        .map(|name| name.strip_prefix("bf.").unwrap_or(name))
        .filter(|name| name.starts_with("bf-"))
        .collect();
    assert!(settings.contains("bf-error-rate"), "{settings:?}");
    for setting in &settings {
        if !configuration.contains(&format!("\n| `{setting}` |")) {
            missing.push(format!(
                "setting {setting}: no row in docs/configuration.md"
            ));
        }
    }
    let info: String = con.q(&cmd!("INFO", "bf"));
    let fields: Vec<&str> = info
        .lines()
        .filter_map(|line| line.split_once(':').map(|(field, _)| field))
        .collect();
    assert!(fields.contains(&"bf_filters"), "{info}");
    for field in fields {
        if !text.contains(&format!("`{field}`")) {
            missing.push(format!("INFO bf field {field}: not in the README or docs/"));
        }
    }
    assert!(missing.is_empty(), "undocumented:\n{}", missing.join("\n"));
}
