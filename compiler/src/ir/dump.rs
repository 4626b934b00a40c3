//! A stable, readable text form of the graph, for snapshot tests and
//! `trtc inspect`.
//!
//! ```text
//! input %x: f32[1,4]
//! %w: f32[4,2] = Const
//! %y: f32[1,2] = MatMul(%x, %w)            # /fc/MatMul
//! output "y" = %y
//! ```

use super::{Graph, NodeKind, Port};
use std::fmt::Write;

/// The op's attributes as text: its Debug form without the type name.
pub fn op_attrs(op: &trtc_runtime::Op) -> String {
    let dbg = format!("{:?}", op.unwrapped().as_impl());
    match dbg.find(" {") {
        Some(i) if dbg.ends_with('}') => {
            let inner = dbg[i + 2..dbg.len() - 1].trim();
            if inner.is_empty() {
                String::new()
            } else {
                format!(" {{{inner}}}")
            }
        }
        _ => String::new(),
    }
}

impl Graph {
    fn port_name(&self, p: Port) -> String {
        format!("%{}", self.g[p.node].outputs[p.port].name)
    }

    /// The text dump; nodes in topological order.
    pub fn dump(&self) -> String {
        let mut s = String::new();
        for &n in &self.inputs {
            let o = &self.g[n].outputs[0];
            let _ = writeln!(s, "input %{}: {}", o.name, o.ty);
        }
        for (name, t) in &self.fixed_inputs {
            let _ = writeln!(s, "fixed input \"{}\": {} = {:?}", name, t.ty(), t.to_f64_vec());
        }
        for n in self.topo_order() {
            let node = &self.g[n];
            let outs: Vec<String> = node.outputs.iter().map(|o| format!("%{}: {}", o.name, o.ty)).collect();
            match &node.kind {
                NodeKind::Input => {}
                NodeKind::Constant(t) => {
                    let value = if t.len() <= 8 { format!(" {:?}", t.to_f64_vec()) } else { String::new() };
                    let _ = writeln!(s, "{} = Const{}", outs.join(", "), value);
                }
                NodeKind::Op(op) => {
                    let ins: Vec<String> = self
                        .inputs_of(n)
                        .into_iter()
                        .map(|p| p.map(|p| self.port_name(p)).unwrap_or_else(|| "_".into()))
                        .collect();
                    let _ = writeln!(
                        s,
                        "{} = {}{}({})  # {}",
                        outs.join(", "),
                        op.display_name(),
                        op_attrs(op),
                        ins.join(", "),
                        node.name
                    );
                }
            }
        }
        for o in &self.outputs {
            let _ = writeln!(s, "output \"{}\" = {}", o.name, self.port_name(o.port));
        }
        s
    }
}

impl Graph {
    /// Graphviz of the graph: ops as boxes labelled with op type and node
    /// name (traceable to the ONNX nodes), edges labelled with tensor types.
    /// Constants are folded into their consumers' labels to keep it legible.
    pub fn to_dot(&self) -> String {
        let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let mut s = String::from("digraph trtc {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n");
        for n in self.topo_order() {
            let node = &self.g[n];
            match &node.kind {
                NodeKind::Constant(_) => continue,
                NodeKind::Input => {
                    let _ = writeln!(
                        s,
                        "  n{} [label=\"input {}\\n{}\", shape=ellipse];",
                        n.index(),
                        esc(&node.name),
                        node.outputs[0].ty
                    );
                }
                NodeKind::Op(op) => {
                    let consts: Vec<String> = self
                        .inputs_of(n)
                        .into_iter()
                        .flatten()
                        .filter(|p| self.g[p.node].constant().is_some())
                        .map(|p| format!("w: {}", self.ty(p)))
                        .collect();
                    let extra = if consts.is_empty() { String::new() } else { format!("\\n{}", consts.join("\\n")) };
                    let _ = writeln!(s, "  n{} [label=\"{}\\n{}{}\"];", n.index(), op.display_name(), esc(&node.name), extra);
                }
            }
            for (slot, p) in self.inputs_of(n).into_iter().enumerate() {
                let Some(p) = p else { continue };
                if self.g[p.node].constant().is_some() {
                    continue;
                }
                let _ =
                    writeln!(s, "  n{} -> n{} [label=\"{}\", fontsize=8]; // slot {slot}", p.node.index(), n.index(), self.ty(p));
            }
        }
        for (i, o) in self.outputs.iter().enumerate() {
            let _ = writeln!(s, "  out{i} [label=\"output {}\", shape=ellipse];", esc(&o.name));
            if self.g[o.port.node].constant().is_none() {
                let _ = writeln!(s, "  n{} -> out{i};", o.port.node.index());
            }
        }
        s.push_str("}\n");
        s
    }
}
