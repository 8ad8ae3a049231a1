//! No import circle inside any crate: a module that imports another (`use crate::…`,
//! `super::…`) is a layer above it, and two modules importing each other are one knot that
//! neither can be read, tested or moved without the other. The check reads the `crate::` and
//! `super::` paths of each module's non-test code (comments left out) and fails on a cycle,
//! naming its modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `src`, by its module path (`training::job`; the crate root is "").
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut modules = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(
            parts.last().map(String::as_str),
            Some("lib" | "main" | "mod")
        ) {
            parts.pop();
        }
        modules.insert(parts.join("::"), file);
    }
    modules
}

/// The non-test code of a file without its comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths that follow each `prefix` in `code` (`crate::keys::Keys` gives `keys::Keys`).
fn paths_after<'a>(code: &'a str, prefix: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    code.match_indices(prefix).map(move |(at, _)| {
        let rest = &code[at + prefix.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        rest[..end].trim_end_matches(':')
    })
}

/// The module of `modules` that `path` names: its longest prefix that is a module.
fn module_of(path: &[&str], modules: &BTreeMap<String, PathBuf>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|name| modules.contains_key(name))
}

/// Which modules each module imports (the root and itself left out).
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(src);
    let mut edges = BTreeMap::new();
    for (name, file) in &modules {
        let code = code(&std::fs::read_to_string(file).unwrap());
        let parent: Vec<&str> = name.split("::").filter(|p| !p.is_empty()).collect();
        let parent = &parent[..parent.len().saturating_sub(1)];
        let mut targets = BTreeSet::new();
        for path in paths_after(&code, "crate::") {
            targets.extend(module_of(&path.split("::").collect::<Vec<_>>(), &modules));
        }
        for path in paths_after(&code, "super::") {
            let mut full: Vec<&str> = parent.to_vec();
            full.extend(path.split("::"));
            targets.extend(module_of(&full, &modules));
        }
        targets.retain(|t| !t.is_empty() && t != name);
        edges.insert(name.clone(), targets);
    }
    edges
}

/// The cycles of `edges`: each strongly connected set of more than one module (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(v: &'a str, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(w, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(v, &mut state);
        }
    }
    state.found
}

fn crate_sources() -> Vec<PathBuf> {
    let mut sources = Vec::new();
    for room in ["shared", "tools"] {
        for entry in std::fs::read_dir(room).unwrap().flatten() {
            let src = entry.path().join("src");
            if src.is_dir() {
                sources.push(src);
            }
        }
    }
    sources.sort();
    sources
}

#[test]
fn no_crate_has_an_import_cycle() {
    let sources = crate_sources();
    assert!(sources.len() >= 25, "{sources:?}");
    let knots: Vec<String> = sources
        .iter()
        .flat_map(|src| {
            cycles(&imports(src))
                .into_iter()
                .map(move |c| format!("{}: {}", src.display(), c.join(" <-> ")))
        })
        .collect();
    assert!(knots.is_empty(), "import cycles:\n{}", knots.join("\n"));
}

/// The check finds a cycle through `super::` and one of three modules, and not a chain.
#[test]
fn a_planted_cycle_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("parts")).unwrap();
    let files = [
        (
            "lib.rs",
            "pub mod a;\npub mod b;\npub mod c;\npub mod parts;\n",
        ),
        ("a.rs", "use crate::b::Thing;\n"),
        (
            "b.rs",
            "// use crate::a is only a comment\npub struct Thing;\n",
        ),
        ("c.rs", "use crate::parts::x::Y;\n"),
        ("parts/mod.rs", "pub mod x;\nuse crate::c;\n"),
        (
            "parts/x.rs",
            "use super::Z;\n#[cfg(test)]\nmod tests { use crate::a; }\n",
        ),
    ];
    for (path, text) in files {
        std::fs::write(src.join(path), text).unwrap();
    }
    assert_eq!(
        cycles(&imports(src)),
        vec![vec!["c".to_string(), "parts".into(), "parts::x".into()]]
    );
    std::fs::write(src.join("parts/x.rs"), "pub struct Y;\n").unwrap();
    assert!(cycles(&imports(src)).is_empty());
}
