//! The layering check: in every module, child modules are declared lowest
//! layer first, and a module uses only siblings declared above it. That
//! makes the module graph acyclic at every level, and each `mod` list reads
//! as that level's dependency picture, bottom layer first.
//!
//! A reference is any path that names a module of the crate: `use` trees
//! (braces expanded), and paths in code that start with `crate::`, `super::`,
//! `self::` or the name of a child module. A module may always reach into its
//! own ancestors and descendants; only references between siblings (or their
//! descendants) are layered.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::source::{tokenize, Spanned, Token};

/// A module's path from the crate root (`[]` is the root).
pub type ModPath = Vec<String>;

/// One child module and the siblings it uses.
pub type ChildUses = (String, Vec<String>);

/// One module: where it is defined and its children in declaration order.
#[derive(Debug, Default)]
pub struct Module {
    pub file: PathBuf,
    pub children: Vec<String>,
}

/// One path in the source that names a module of the crate.
#[derive(Debug, Clone)]
pub struct Reference {
    pub from: ModPath,
    pub to: ModPath,
    pub file: PathBuf,
    pub line: usize,
}

/// A use of a sibling declared below the user.
#[derive(Debug)]
pub struct Violation {
    pub parent: ModPath,
    pub user: String,
    pub used: String,
    /// The first reference that makes the dependency.
    pub reference: Reference,
    /// How many references make it.
    pub count: usize,
}

/// A crate's modules and the references between them.
#[derive(Debug, Default)]
pub struct Crate {
    pub modules: BTreeMap<ModPath, Module>,
    pub references: Vec<Reference>,
}

impl Crate {
    /// Reads the crate whose root file is `root` (`src/lib.rs`, `src/main.rs`).
    pub fn read(root: &Path) -> Result<Crate, String> {
        let mut modules = BTreeMap::new();
        let mut raw = Vec::new();
        let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
        read_file(root, Vec::new(), dir, &mut modules, &mut raw)?;
        let references = raw.into_iter().filter_map(|r| resolve(&modules, r)).collect();
        Ok(Crate { modules, references })
    }

    /// Each sibling dependency against the declaration order, once, with its
    /// first reference and how many references there are.
    pub fn violations(&self) -> Vec<Violation> {
        let mut out: Vec<Violation> = Vec::new();
        for r in &self.references {
            let Some((parent, user, used)) = sibling_edge(&r.from, &r.to) else { continue };
            let children = &self.modules[&parent].children;
            let index = |name: &String| children.iter().position(|c| c == name);
            if index(&used) <= index(&user) {
                continue;
            }
            match out.iter_mut().find(|v| v.parent == parent && v.user == user && v.used == used) {
                Some(v) => v.count += 1,
                None => out.push(Violation { parent, user, used, reference: r.clone(), count: 1 }),
            }
        }
        out
    }

    /// For a module whose children are not layered: the sibling groups that
    /// use each other in a cycle (no order can fix those), and otherwise an
    /// order that works, as close to the current one as possible.
    pub fn suggested_order(&self, parent: &ModPath) -> Result<Vec<String>, Vec<String>> {
        let rows = self.sibling_graph().into_iter().find(|(p, _)| p == parent).map(|(_, rows)| rows).unwrap_or_default();
        // Kahn's algorithm, always taking the earliest-declared ready module.
        let mut placed: Vec<String> = Vec::new();
        while placed.len() < rows.len() {
            let ready = rows.iter().find(|(c, uses)| !placed.contains(c) && uses.iter().all(|u| placed.contains(u) || u == c));
            match ready {
                Some((c, _)) => placed.push(c.clone()),
                None => {
                    let stuck: Vec<&String> = rows.iter().map(|(c, _)| c).filter(|c| !placed.contains(c)).collect();
                    return Err(smallest_cycle(&rows, &stuck));
                }
            }
        }
        Ok(placed)
    }

    /// For each module with children: the children in declaration order, each
    /// with the siblings it uses.
    pub fn sibling_graph(&self) -> Vec<(ModPath, Vec<ChildUses>)> {
        let mut out = Vec::new();
        for (path, module) in &self.modules {
            if module.children.len() < 2 {
                continue;
            }
            let mut rows: Vec<(String, Vec<String>)> = module.children.iter().map(|c| (c.clone(), Vec::new())).collect();
            for r in &self.references {
                let Some((parent, user, used)) = sibling_edge(&r.from, &r.to) else { continue };
                if &parent != path {
                    continue;
                }
                if let Some(row) = rows.iter_mut().find(|(c, _)| *c == user) {
                    if !row.1.contains(&used) {
                        row.1.push(used);
                    }
                }
            }
            for row in &mut rows {
                row.1.sort_by_key(|u| module.children.iter().position(|c| c == u));
            }
            out.push((path.clone(), rows));
        }
        out
    }
}

/// Among `stuck` modules (each waits on another), the smallest group that
/// all reach each other: a cycle to break.
fn smallest_cycle(rows: &[(String, Vec<String>)], stuck: &[&String]) -> Vec<String> {
    let uses = |c: &String| rows.iter().find(|(r, _)| r == c).map(|(_, u)| u.clone()).unwrap_or_default();
    let reachable = |from: &String| {
        let mut seen: Vec<String> = Vec::new();
        let mut todo = uses(from);
        while let Some(c) = todo.pop() {
            if !seen.contains(&c) {
                todo.extend(uses(&c));
                seen.push(c);
            }
        }
        seen
    };
    let mut best: Vec<String> = stuck.iter().map(|c| c.to_string()).collect();
    for &c in stuck {
        let from_c = reachable(c);
        if !from_c.contains(c) {
            continue;
        }
        let group: Vec<String> =
            rows.iter().map(|(r, _)| r.clone()).filter(|r| r == c || (from_c.contains(r) && reachable(r).contains(c))).collect();
        if group.len() < best.len() {
            best = group;
        }
    }
    best
}

/// Where two modules meet: their deepest common ancestor and the children of
/// it that lead to each; `None` when one contains the other.
fn sibling_edge(from: &ModPath, to: &ModPath) -> Option<(ModPath, String, String)> {
    let k = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if k == from.len() || k == to.len() {
        return None;
    }
    Some((from[..k].to_vec(), from[k].clone(), to[k].clone()))
}

/// A `mod name;` whose body is in a file of its own.
struct FileChild {
    module: ModPath,
    /// The inline modules between the file's module and the declaration.
    inline: Vec<String>,
    path_attr: Option<String>,
}

/// A path as written, resolved once every module is known.
struct RawPath {
    from: ModPath,
    segments: Vec<String>,
    file: PathBuf,
    line: usize,
}

/// Reads `file`, which defines module `path`; its `mod x;` children live in `dir`.
fn read_file(
    file: &Path,
    path: ModPath,
    dir: PathBuf,
    modules: &mut BTreeMap<ModPath, Module>,
    raw: &mut Vec<RawPath>,
) -> Result<(), String> {
    let text = fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    modules.entry(path.clone()).or_default().file = file.to_path_buf();
    let children = scan(&tokenize(&text), &path, file, modules, raw);
    for child in children {
        let child_file = match &child.path_attr {
            Some(p) => file.parent().unwrap_or(Path::new(".")).join(p),
            None => {
                let base = child.inline.iter().fold(dir.clone(), |d, m| d.join(m));
                let name = child.module.last().expect("a child module has a name");
                let flat = base.join(format!("{name}.rs"));
                if flat.exists() {
                    flat
                } else {
                    base.join(name).join("mod.rs")
                }
            }
        };
        let parent = child_file.parent().unwrap_or(Path::new(".")).to_path_buf();
        let child_dir = if child_file.file_name().is_some_and(|n| n == "mod.rs") {
            parent
        } else {
            parent.join(child_file.file_stem().unwrap_or_default())
        };
        read_file(&child_file, child.module, child_dir, modules, raw)?;
    }
    Ok(())
}

/// Finds module declarations and paths in one file's tokens.
fn scan(
    t: &[Spanned],
    file_module: &ModPath,
    file: &Path,
    modules: &mut BTreeMap<ModPath, Module>,
    raw: &mut Vec<RawPath>,
) -> Vec<FileChild> {
    let ident = |i: usize| match t.get(i).map(|s| &s.token) {
        Some(Token::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    let is = |i: usize, tok: Token| t.get(i).map(|s| &s.token) == Some(&tok);
    let mut children = Vec::new();
    // Open inline modules: their paths and the brace depth inside them.
    let mut inline: Vec<(ModPath, usize)> = Vec::new();
    let mut depth = 0;
    let mut path_attr = None;
    let mut i = 0;
    while i < t.len() {
        let current = inline.last().map(|(p, _)| p.clone()).unwrap_or_else(|| file_module.clone());
        if ident(i) == Some("mod") && ident(i + 1).is_some() && (is(i + 2, Token::Punct(';')) || is(i + 2, Token::Punct('{'))) {
            let name = ident(i + 1).unwrap().to_string();
            let mut module = current.clone();
            module.push(name.clone());
            modules.entry(current.clone()).or_default().children.push(name);
            if is(i + 2, Token::Punct(';')) {
                let prefix = current[file_module.len()..].to_vec();
                children.push(FileChild { module, inline: prefix, path_attr: path_attr.take() });
            } else {
                modules.entry(module.clone()).or_default().file = file.to_path_buf();
                depth += 1;
                inline.push((module, depth));
            }
            i += 3;
            continue;
        }
        match &t[i].token {
            Token::Punct('#') if is(i + 1, Token::Punct('[')) && ident(i + 2) == Some("path") && is(i + 3, Token::Punct('=')) => {
                if let Some(Spanned { token: Token::Str(p), .. }) = t.get(i + 4) {
                    path_attr = Some(p.clone());
                }
                i += 5;
                continue;
            }
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Token::Ident(word) if word == "use" => {
                let line = t[i].line;
                let mut j = i + 1;
                for segments in use_tree(t, &mut j, Vec::new()) {
                    raw.push(RawPath { from: current.clone(), segments, file: file.to_path_buf(), line });
                }
                i = j;
                continue;
            }
            Token::Ident(_) if is(i + 1, Token::PathSep) && !(i > 0 && is(i - 1, Token::PathSep)) => {
                let line = t[i].line;
                let mut segments = Vec::new();
                let mut j = i;
                while let Some(s) = ident(j) {
                    segments.push(s.to_string());
                    if !is(j + 1, Token::PathSep) {
                        break;
                    }
                    j += 2;
                }
                raw.push(RawPath { from: current, segments, file: file.to_path_buf(), line });
                i = j + 1;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    children
}

/// The paths a `use` tree names, braces expanded; `i` is left after it.
fn use_tree(t: &[Spanned], i: &mut usize, mut prefix: Vec<String>) -> Vec<Vec<String>> {
    let at = |i: usize| t.get(i).map(|s| &s.token);
    if at(*i) == Some(&Token::PathSep) {
        *i += 1;
    }
    loop {
        match at(*i) {
            Some(Token::Ident(s)) => {
                prefix.push(s.clone());
                *i += 1;
                if at(*i) == Some(&Token::PathSep) {
                    *i += 1;
                    continue;
                }
                if matches!(at(*i), Some(Token::Ident(a)) if a == "as") {
                    *i += 2;
                }
                return vec![prefix];
            }
            Some(Token::Punct('{')) => {
                *i += 1;
                let mut out = Vec::new();
                while let Some(tok) = at(*i) {
                    match tok {
                        Token::Punct('}') => {
                            *i += 1;
                            break;
                        }
                        Token::Punct(',') => *i += 1,
                        _ => {
                            let before = *i;
                            out.extend(use_tree(t, i, prefix.clone()));
                            if *i == before {
                                *i += 1;
                            }
                        }
                    }
                }
                return out;
            }
            Some(Token::Punct('*')) => {
                *i += 1;
                return vec![prefix];
            }
            _ => return vec![prefix],
        }
    }
}

/// The module a path names, if it names one of the crate's.
fn resolve(modules: &BTreeMap<ModPath, Module>, raw: RawPath) -> Option<Reference> {
    let mut segments = raw.segments.iter().map(String::as_str).peekable();
    let mut base = match segments.peek().copied()? {
        "crate" => {
            segments.next();
            Vec::new()
        }
        "self" => {
            segments.next();
            raw.from.clone()
        }
        "super" => {
            let mut base = raw.from.clone();
            while segments.peek() == Some(&"super") {
                segments.next();
                base.pop()?;
            }
            base
        }
        first => {
            let children = &modules.get(&raw.from)?.children;
            if !children.iter().any(|c| c == first) {
                return None;
            }
            raw.from.clone()
        }
    };
    for s in segments.filter(|s| *s != "self") {
        let mut next = base.clone();
        next.push(s.to_string());
        if !modules.contains_key(&next) {
            break;
        }
        base = next;
    }
    Some(Reference { from: raw.from, to: base, file: raw.file, line: raw.line })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a crate into a temporary directory and reads it back.
    fn krate(name: &str, files: &[(&str, &str)]) -> Crate {
        let dir = std::env::temp_dir().join(format!("xtask-layers-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        for (path, text) in files {
            let path = dir.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        let krate = Crate::read(&dir.join("lib.rs")).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        krate
    }

    fn edges(k: &Crate) -> Vec<String> {
        k.violations()
            .iter()
            .map(|v| format!("{}{}->{}", v.parent.iter().map(|p| format!("{p}:")).collect::<String>(), v.user, v.used))
            .collect()
    }

    #[test]
    fn upward_use_is_a_violation() {
        let k = krate(
            "upward",
            &[
                ("lib.rs", "pub mod ir;\npub mod passes;\n"),
                ("ir.rs", "use crate::passes::Pass;\n"),
                ("passes/mod.rs", "use crate::ir::Graph;\n"),
            ],
        );
        assert_eq!(edges(&k), ["ir->passes"]);
    }

    #[test]
    fn nested_braces_super_and_inline_modules() {
        let k = krate(
            "nested",
            &[
                ("lib.rs", "mod a;\nmod b;\n"),
                ("a.rs", "pub mod x { pub fn f() {} }\npub mod y { fn g() { super::x::f(); } }\n#[cfg(test)] mod tests { use super::*; use crate::{b::{self, z}}; }\n"),
                ("b/mod.rs", "#[path = \"zz.rs\"] pub mod z;\n"),
                ("b/zz.rs", "fn h() { let s = \"crate::a::x\"; crate::a::x::f(); }\n"),
            ],
        );
        // a::tests uses b (declared below a); b::z uses a::x (fine); a::y uses
        // a::x (declared above it, fine).
        assert_eq!(edges(&k), ["a->b"]);
        assert_eq!(k.modules[&vec!["b".to_string()]].children, ["z"]);
    }

    #[test]
    fn a_sibling_declared_below_its_user_inside_a_module() {
        let k =
            krate("inner", &[("lib.rs", "mod p;\n"), ("p.rs", "mod one { use super::two::T; }\nmod two { pub struct T; }\n")]);
        assert_eq!(edges(&k), ["p:one->two"]);
    }
}
