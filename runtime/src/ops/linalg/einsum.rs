//! Einsum: Einstein summation over any number of operands, with implicit
//! and explicit output, repeated labels (diagonals) and `...` (broadcast
//! batch dimensions).
//!
//! Evaluation: each operand is read through strides into a contiguous term
//! with one axis per distinct label (diagonals and broadcasting are just
//! strides); labels no other operand and not the output use are summed out;
//! then terms are contracted pairwise, left to right, each contraction being
//! a batched matrix multiply `[batch, m, k] × [batch, k, n]`. A final
//! permutation puts the labels in output order.

use super::num::{narrow_into, widen, Scalar};
use super::GemmArgs;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::OpImpl;
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Einsum {
    /// The equation as ONNX gives it, e.g. `"bij,bjk->bik"`.
    pub equation: String,
}

/// A label: an ASCII letter's code, or `ELLIPSIS + j` for the j-th
/// (right-aligned) dimension covered by `...`.
type Label = u32;
const ELLIPSIS: Label = 1000;

/// An equation resolved against input ranks.
struct Parsed {
    inputs: Vec<Vec<Label>>,
    output: Vec<Label>,
    sizes: BTreeMap<Label, usize>,
}

/// Splits one term into letters and the position of `...`, if any.
fn parse_term(term: &str) -> Result<(Vec<Label>, Option<usize>)> {
    let mut letters = Vec::new();
    let mut ellipsis = None;
    let mut rest = term.trim();
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("...") {
            ensure_op!(ellipsis.is_none(), "Einsum: '...' appears twice in term '{term}'");
            ellipsis = Some(letters.len());
            rest = &rest[3..];
        } else if c.is_ascii_alphabetic() {
            letters.push(c as Label);
            rest = &rest[1..];
        } else if c.is_whitespace() {
            rest = &rest[1..];
        } else {
            bail_op!("Einsum: unexpected character '{c}' in term '{term}'");
        }
    }
    Ok((letters, ellipsis))
}

/// Inserts the ellipsis labels of `count` dimensions out of `total`.
fn expand(letters: &[Label], ellipsis: Option<usize>, count: usize, total: usize) -> Vec<Label> {
    match ellipsis {
        None => letters.to_vec(),
        Some(at) => {
            let mut v = letters[..at].to_vec();
            v.extend((total - count..total).map(|j| ELLIPSIS + j as Label));
            v.extend(&letters[at..]);
            v
        }
    }
}

fn parse(equation: &str, shapes: &[&[usize]]) -> Result<Parsed> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    ensure_op!(terms.len() == shapes.len(), "Einsum: equation '{equation}' has {} operands, {} given", terms.len(), shapes.len());
    let parsed: Vec<(Vec<Label>, Option<usize>)> = terms.iter().map(|t| parse_term(t)).collect::<Result<_>>()?;
    let mut ell_counts = Vec::new();
    for ((letters, ell), shape) in parsed.iter().zip(shapes) {
        let n = shape.len() as isize - letters.len() as isize;
        ensure_op!(
            n == 0 || (n > 0 && ell.is_some()),
            "Einsum: operand of rank {} does not match its term in '{equation}'",
            shape.len()
        );
        ell_counts.push(if ell.is_some() { n.max(0) as usize } else { 0 });
    }
    let total = ell_counts.iter().copied().max().unwrap_or(0);
    let inputs: Vec<Vec<Label>> = parsed.iter().zip(&ell_counts).map(|((l, e), &c)| expand(l, *e, c, total)).collect();
    let mut sizes: BTreeMap<Label, usize> = BTreeMap::new();
    for (labels, shape) in inputs.iter().zip(shapes) {
        let mut own: BTreeMap<Label, usize> = BTreeMap::new();
        for (&l, &d) in labels.iter().zip(shape.iter()) {
            if let Some(&prev) = own.get(&l) {
                ensure_op!(prev == d, "Einsum: repeated label '{}' has sizes {prev} and {d}", label_name(l));
            }
            own.insert(l, d);
            let e = sizes.entry(l).or_insert(d);
            if *e == 1 {
                *e = d;
            } else {
                ensure_op!(d == *e || d == 1, "Einsum: label '{}' has sizes {} and {d}", label_name(l), *e);
            }
        }
    }
    let output = match rhs {
        Some(r) => {
            let (letters, ell) = parse_term(r)?;
            ensure_op!(ell.is_some() || total == 0 || ell_counts.iter().all(|&c| c == 0), "Einsum: the output must keep '...'");
            expand(&letters, ell, total, total)
        }
        None => {
            let mut once: Vec<Label> = sizes
                .keys()
                .copied()
                .filter(|&l| l < ELLIPSIS && inputs.iter().flatten().filter(|&&x| x == l).count() == 1)
                .collect();
            once.sort();
            let mut out: Vec<Label> = (0..total).map(|j| ELLIPSIS + j as Label).collect();
            out.extend(once);
            out
        }
    };
    for (i, &l) in output.iter().enumerate() {
        ensure_op!(sizes.contains_key(&l), "Einsum: output label '{}' is in no input", label_name(l));
        ensure_op!(!output[..i].contains(&l), "Einsum: output label '{}' repeated", label_name(l));
    }
    Ok(Parsed { inputs, output, sizes })
}

fn label_name(l: Label) -> String {
    if l >= ELLIPSIS {
        "...".into()
    } else {
        char::from_u32(l).map_or("?".into(), String::from)
    }
}

impl OpImpl for Einsum {
    fn name(&self) -> &'static str {
        "Einsum"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        ensure_op!(!inputs.is_empty() && inputs.iter().all(|i| i.is_some()), "Einsum: every operand is required");
        let types: Vec<&TensorType> = inputs.iter().flatten().copied().collect();
        let dtype = types[0].dtype;
        ensure_op!(types.iter().all(|t| t.dtype == dtype), "Einsum: operand dtypes differ");
        ensure_op!(
            matches!(
                dtype,
                DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::I32 | DType::I64 | DType::U32 | DType::U64
            ),
            "Einsum: unsupported dtype {dtype}"
        );
        let shapes: Vec<&[usize]> = types.iter().map(|t| t.shape.as_slice()).collect();
        let p = parse(&self.equation, &shapes)?;
        let shape = p.output.iter().map(|l| p.sizes[l]).collect::<Vec<_>>();
        Ok(vec![TensorType::new(dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let views: Vec<TensorView> = inputs.iter().flatten().copied().collect();
        ensure_op!(views.len() == inputs.len() && !views.is_empty(), "Einsum: every operand is required");
        let shapes: Vec<&[usize]> = views.iter().map(|v| v.shape).collect();
        let p = parse(&self.equation, &shapes)?;
        let out = &mut outputs[0];
        macro_rules! native {
            ($t:ty) => {{
                let datas: Vec<&[$t]> = views.iter().map(|v| v.as_slice::<$t>()).collect::<Result<_>>()?;
                out.as_mut_slice::<$t>()?.copy_from_slice(&evaluate(&p, &shapes, &datas));
            }};
        }
        match views[0].dtype {
            DType::F32 => native!(f32),
            DType::F64 => native!(f64),
            DType::I32 => native!(i32),
            DType::I64 => native!(i64),
            DType::U32 => native!(u32),
            DType::U64 => native!(u64),
            DType::F16 | DType::BF16 => {
                let wide: Vec<Vec<f32>> = views.iter().map(widen).collect::<Result<_>>()?;
                let datas: Vec<&[f32]> = wide.iter().map(|v| v.as_slice()).collect();
                narrow_into(out, &evaluate(&p, &shapes, &datas))?;
            }
            d => bail_op!("Einsum: unsupported dtype {d}"),
        }
        Ok(())
    }
}

/// A contiguous intermediate: one axis per distinct label.
struct Term<T> {
    labels: Vec<Label>,
    data: Vec<T>,
}

fn evaluate<T: Scalar>(p: &Parsed, shapes: &[&[usize]], datas: &[&[T]]) -> Vec<T> {
    let size = |l: &Label| p.sizes[l];
    let mut terms: Vec<Term<T>> = Vec::with_capacity(datas.len());
    for (i, (labels, data)) in p.inputs.iter().zip(datas).enumerate() {
        // Distinct labels with summed strides (diagonals); stride 0 where a
        // size-1 axis broadcasts.
        let own = crate::ops::util::strides(shapes[i]);
        let mut uniq: Vec<Label> = Vec::new();
        let mut strides: Vec<usize> = Vec::new();
        for (ax, &l) in labels.iter().enumerate() {
            let st = if shapes[i][ax] == 1 { 0 } else { own[ax] };
            match uniq.iter().position(|&u| u == l) {
                Some(j) => strides[j] += st,
                None => {
                    uniq.push(l);
                    strides.push(st);
                }
            }
        }
        let sizes: Vec<usize> = uniq.iter().map(size).collect();
        let term = Term { data: gather(data, &sizes, &strides), labels: uniq };
        // Sum out labels used nowhere else.
        let used_elsewhere =
            |l: &Label| p.output.contains(l) || p.inputs.iter().enumerate().any(|(j, ls)| j != i && ls.contains(l));
        let keep: Vec<Label> = term.labels.iter().copied().filter(used_elsewhere).collect();
        terms.push(sum_to(term, &keep, &size));
    }
    let mut acc = terms.remove(0);
    for (i, next) in terms.into_iter().enumerate() {
        let later = &p.inputs[i + 2..];
        let keep = |l: &Label| p.output.contains(l) || later.iter().any(|ls| ls.contains(l));
        acc = contract(acc, next, &keep, &size);
    }
    permute(&acc, &p.output, &size)
}

/// Reads `src` at `strides` into a contiguous row-major array of `sizes`.
fn gather<T: Copy>(src: &[T], sizes: &[usize], strides: &[usize]) -> Vec<T> {
    let n: usize = sizes.iter().product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let r = sizes.len();
    if r == 0 {
        out.push(src[0]);
        return out;
    }
    let (inner, inner_stride) = (sizes[r - 1], strides[r - 1]);
    let mut idx = vec![0usize; r - 1];
    let mut base = 0usize;
    loop {
        out.extend((0..inner).map(|j| src[base + j * inner_stride]));
        // Advance the odometer over the outer axes.
        let mut d = r - 1;
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            base += strides[d];
            if idx[d] < sizes[d] {
                break;
            }
            base -= strides[d] * sizes[d];
            idx[d] = 0;
        }
    }
}

/// The term's data with its axes in `order` (a permutation of its labels
/// plus nothing else).
fn permute<T: Copy>(t: &Term<T>, order: &[Label], size: &impl Fn(&Label) -> usize) -> Vec<T> {
    let sizes: Vec<usize> = t.labels.iter().map(size).collect();
    let own = crate::ops::util::strides(&sizes);
    let strides: Vec<usize> =
        order.iter().map(|l| own[t.labels.iter().position(|x| x == l).expect("label of the term")]).collect();
    let out_sizes: Vec<usize> = order.iter().map(size).collect();
    gather(&t.data, &out_sizes, &strides)
}

/// Sums out every label of `t` not in `keep`.
fn sum_to<T: Scalar>(t: Term<T>, keep: &[Label], size: &impl Fn(&Label) -> usize) -> Term<T> {
    if keep.len() == t.labels.len() {
        return t;
    }
    let dropped: Vec<Label> = t.labels.iter().copied().filter(|l| !keep.contains(l)).collect();
    let order: Vec<Label> = keep.iter().chain(&dropped).copied().collect();
    let data = permute(&t, &order, size);
    let chunk: usize = dropped.iter().map(size).product();
    let kept: usize = keep.iter().map(size).product();
    let data = if chunk == 0 {
        vec![T::default(); kept]
    } else {
        data.chunks_exact(chunk).map(|c| c.iter().fold(T::default(), |a, &v| a.sadd(v))).collect()
    };
    Term { labels: keep.to_vec(), data }
}

/// Contracts two terms as a batched matrix multiply.
fn contract<T: Scalar>(a: Term<T>, b: Term<T>, keep: &impl Fn(&Label) -> bool, size: &impl Fn(&Label) -> usize) -> Term<T> {
    let in_b = |l: &Label| b.labels.contains(l);
    let batch: Vec<Label> = a.labels.iter().copied().filter(|l| in_b(l) && keep(l)).collect();
    let inner: Vec<Label> = a.labels.iter().copied().filter(|l| in_b(l) && !keep(l)).collect();
    let m_labels: Vec<Label> = a.labels.iter().copied().filter(|l| !in_b(l)).collect();
    let n_labels: Vec<Label> = b.labels.iter().copied().filter(|l| !a.labels.contains(l)).collect();
    let prod = |ls: &[Label]| ls.iter().map(size).product::<usize>();
    let (nb, m, k, n) = (prod(&batch), prod(&m_labels), prod(&inner), prod(&n_labels));
    let a_order: Vec<Label> = batch.iter().chain(&m_labels).chain(&inner).copied().collect();
    let b_order: Vec<Label> = batch.iter().chain(&inner).chain(&n_labels).copied().collect();
    let ad = permute(&a, &a_order, size);
    let bd = permute(&b, &b_order, size);
    let mut out = vec![T::default(); nb * m * n];
    if m * n > 0 && k > 0 {
        let args = GemmArgs::row_major(m, k, n);
        for i in 0..nb {
            T::GEMM(&args, &ad[i * m * k..][..m * k], &bd[i * k * n..][..k * n], &mut out[i * m * n..][..m * n]);
        }
    }
    let labels = batch.iter().chain(&m_labels).chain(&n_labels).copied().collect();
    Term { labels, data: out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn einsum(eq: &str, xs: &[&Tensor]) -> Tensor {
        let op: Op = Einsum { equation: eq.into() }.into();
        let ins: Vec<Option<&Tensor>> = xs.iter().map(|t| Some(*t)).collect();
        op.eval_owned(&ins).unwrap().remove(0)
    }

    #[test]
    fn matmul_transpose_trace_and_sum() {
        let a = Tensor::from_vec(vec![2, 2], vec![1f32, 2., 3., 4.]).unwrap();
        let b = Tensor::from_vec(vec![2, 2], vec![5f32, 6., 7., 8.]).unwrap();
        assert_eq!(einsum("ij,jk->ik", &[&a, &b]).as_slice::<f32>().unwrap(), &[19., 22., 43., 50.]);
        assert_eq!(einsum("ij->ji", &[&a]).as_slice::<f32>().unwrap(), &[1., 3., 2., 4.]);
        assert_eq!(einsum("ii", &[&a]).as_slice::<f32>().unwrap(), &[5.]);
        assert_eq!(einsum("ij->i", &[&a]).as_slice::<f32>().unwrap(), &[3., 7.]);
        // Implicit output: "ji" keeps both labels in alphabetical order.
        assert_eq!(einsum("ji", &[&a]).as_slice::<f32>().unwrap(), &[1., 3., 2., 4.]);
    }

    #[test]
    fn ellipsis_batches_and_three_operands() {
        let a = Tensor::from_vec(vec![2, 1, 2], vec![1i64, 2, 3, 4]).unwrap();
        let b = Tensor::from_vec(vec![2, 1], vec![10i64, 100]).unwrap();
        let y = einsum("...ij,jk->...ik", &[&a, &b]);
        assert_eq!(y.shape(), &[2, 1, 1]);
        assert_eq!(y.as_slice::<i64>().unwrap(), &[210, 430]);
        let v = Tensor::from_vec(vec![2], vec![1f64, 2.]).unwrap();
        let m = Tensor::from_vec(vec![2, 2], vec![1f64, 0., 0., 1.]).unwrap();
        assert_eq!(einsum("i,ij,j->", &[&v, &m, &v]).as_slice::<f64>().unwrap(), &[5.]);
    }
}
