//! numpy arrays to and from the runtime's tensors.
//!
//! Inputs are read in place when they are C-contiguous arrays of the
//! binding's dtype; array-likes that are not arrays (lists, scalars) are
//! converted to it first. Outputs are new numpy arrays.
//!
//! numpy has no bfloat16 or 8-bit float types: those tensors cross as their
//! raw words (`uint16`, `uint8`), and so do the unpacked 4-bit integers
//! (`int8`, `uint8`, one per byte).

use crate::errors::{self, Kind};
use numpy::{PyArray, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use trtc_runtime::{DType, Tensor, TensorView};

/// The numpy dtype name that holds `d`.
pub fn numpy_dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::F64 => "float64",
        DType::BF16 | DType::U16 => "uint16",
        DType::I8 | DType::I4 => "int8",
        DType::I16 => "int16",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::U8 | DType::U4 | DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ => "uint8",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
        DType::Bool => "bool",
    }
}

/// `numpy.dtype(name)` for `d`.
pub fn numpy_dtype<'py>(py: Python<'py>, d: DType) -> PyResult<Bound<'py, PyAny>> {
    py.import("numpy")?.getattr("dtype")?.call1((numpy_dtype_name(d),))
}

/// An input as a C-contiguous numpy array of the dtype that holds `want`.
/// Arrays must already have that dtype (no silent narrowing of a float64
/// array into a float32 binding); other array-likes are converted when
/// numpy's same-kind casting allows it.
pub fn input_array<'py>(py: Python<'py>, name: &str, value: &Bound<'py, PyAny>, want: DType) -> PyResult<Bound<'py, PyAny>> {
    let np = py.import("numpy")?;
    let want_dtype = numpy_dtype(py, want)?;
    let is_array = value.is_instance(&np.getattr("ndarray")?)?;
    let array = np
        .getattr("asarray")?
        .call1((value,))
        .map_err(|e| errors::error(Kind::Binding, format!("input '{name}': not an array ({})", e.value(py))))?;
    let dtype = array.getattr("dtype")?;
    let array = if dtype.eq(&want_dtype)? {
        array
    } else if !is_array && np.getattr("can_cast")?.call1((&dtype, &want_dtype, "same_kind"))?.is_truthy()? {
        array.call_method1("astype", (&want_dtype,))?
    } else {
        let np_name = numpy_dtype_name(want);
        return Err(errors::error(
            Kind::Binding,
            format!(
                "input '{name}' must be {want} (numpy {np_name}), got an array of {} (convert it with .astype(numpy.{np_name}))",
                dtype.str()?
            ),
        ));
    };
    np.getattr("ascontiguousarray")?.call1((array,))
}

/// A view of a C-contiguous numpy array (from [`input_array`]) as a tensor
/// of `dtype`. The view borrows the array's memory: `array` must outlive it
/// and nobody may resize it meanwhile (a Python thread writing into it only
/// changes the values read).
pub fn view<'a>(array: &'a Bound<'_, PyAny>, dtype: DType) -> PyResult<TensorView<'a>> {
    let array = array.cast::<PyUntypedArray>().map_err(PyErr::from)?;
    if !array.is_c_contiguous() {
        return Err(errors::error(Kind::Internal, "internal error: an input array is not C-contiguous"));
    }
    let shape: &'a [usize] = array.shape();
    let elements: usize = shape.iter().product();
    let len = elements * dtype.size();
    // SAFETY: a C-contiguous array of this dtype holds `len` bytes at its
    // data pointer, alive as long as `array` is (see above). An empty
    // array's pointer may be anything, so it is not used.
    let bytes: &'a [u8] =
        if len == 0 { &[] } else { unsafe { std::slice::from_raw_parts((*array.as_array_ptr()).fields.data as *const u8, len) } };
    TensorView::new(dtype, shape, bytes).map_err(errors::runtime)
}

/// An owned copy of an input (for calibration batches, which outlive the
/// call that gets them). A float64 array for a float32 input is narrowed,
/// as `trtc build --calib` does for numpy's default dtype.
pub fn tensor(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>, want: DType) -> PyResult<Tensor> {
    let value = if want == DType::F32 {
        let np = py.import("numpy")?;
        let is_f64 = value.is_instance(&np.getattr("ndarray")?)? && value.getattr("dtype")?.eq(numpy_dtype(py, DType::F64)?)?;
        if is_f64 {
            value.call_method1("astype", ("float32",))?
        } else {
            value.clone()
        }
    } else {
        value.clone()
    };
    let array = input_array(py, name, &value, want)?;
    Ok(view(&array, want)?.to_owned())
}

/// A new numpy array with the tensor's values and shape (one copy).
pub fn output_array<'py>(py: Python<'py>, t: &Tensor) -> PyResult<Bound<'py, PyAny>> {
    fn typed<'py, T: numpy::Element + bytemuck::Pod>(py: Python<'py>, t: &Tensor) -> PyResult<Bound<'py, PyAny>> {
        // A tensor's bytes are aligned for any element type.
        let values: &[T] = bytemuck::try_cast_slice(t.bytes())
            .map_err(|e| errors::error(Kind::Internal, format!("internal error: output bytes as {}: {e}", t.dtype())))?;
        Ok(PyArray::<T, _>::from_slice(py, values).reshape(t.shape().to_vec())?.into_any())
    }
    match t.dtype() {
        DType::F32 => typed::<f32>(py, t),
        DType::F64 => typed::<f64>(py, t),
        DType::F16 => typed::<half::f16>(py, t),
        DType::BF16 | DType::U16 => typed::<u16>(py, t),
        DType::I8 | DType::I4 => typed::<i8>(py, t),
        DType::I16 => typed::<i16>(py, t),
        DType::I32 => typed::<i32>(py, t),
        DType::I64 => typed::<i64>(py, t),
        DType::U8 | DType::U4 | DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ => typed::<u8>(py, t),
        DType::U32 => typed::<u32>(py, t),
        DType::U64 => typed::<u64>(py, t),
        // Stored as bytes 0 or 1, which numpy's bool is.
        DType::Bool => typed::<u8>(py, t)?.call_method1("view", ("bool",)),
    }
}

/// The device address of `value`, an array on the GPU given for the binding
/// `name` of type `ty`: an object with `__cuda_array_interface__` (CuPy
/// arrays, PyTorch CUDA tensors, Numba device arrays), C-contiguous, of the
/// binding's dtype and shape, and writable when it receives an output.
/// The shape a `__cuda_array_interface__` object declares (checked fully by
/// [`device_address`]).
pub fn device_shape(name: &str, value: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    let bad = |why: &str| errors::error(Kind::Binding, format!("'{name}': {why}"));
    let cai = value.getattr("__cuda_array_interface__").map_err(|_| {
        bad("not a GPU array (it has no __cuda_array_interface__; CuPy arrays and PyTorch CUDA tensors have one)")
    })?;
    let shape = cai.get_item("shape").map_err(|_| bad("__cuda_array_interface__ has no 'shape'"))?;
    shape.extract().map_err(|_| bad("__cuda_array_interface__ 'shape' is not a tuple of sizes"))
}

pub fn device_address(
    py: Python<'_>,
    name: &str,
    value: &Bound<'_, PyAny>,
    ty: &trtc_runtime::TensorType,
    writable: bool,
) -> PyResult<u64> {
    let bad = |why: String| errors::error(Kind::Binding, format!("'{name}': {why}"));
    let Ok(cai) = value.getattr("__cuda_array_interface__") else {
        let why = if value.hasattr("__dlpack__")? {
            "a DLPack tensor without __cuda_array_interface__: wrap it, e.g. with cupy.from_dlpack(x)"
        } else {
            "not a GPU array (it has no __cuda_array_interface__; CuPy arrays and PyTorch CUDA tensors have one)"
        };
        return Err(bad(why.into()));
    };
    let item = |key: &str| cai.get_item(key).map_err(|_| bad(format!("__cuda_array_interface__ has no '{key}'")));
    let shape: Vec<usize> =
        item("shape")?.extract().map_err(|_| bad("__cuda_array_interface__ 'shape' is not a tuple of sizes".into()))?;
    let typestr: String =
        item("typestr")?.extract().map_err(|_| bad("__cuda_array_interface__ 'typestr' is not a string".into()))?;
    let (address, readonly): (u64, bool) =
        item("data")?.extract().map_err(|_| bad("__cuda_array_interface__ 'data' is not (address, read-only)".into()))?;
    let want: String = numpy_dtype(py, ty.dtype)?.getattr("str")?.extract()?;
    if typestr != want || shape != ty.shape {
        let got: String = numpy_dtype_name_of(py, &typestr).unwrap_or(typestr);
        return Err(bad(format!("must be {ty} (numpy {}), got a {got} array of shape {shape:?}", numpy_dtype_name(ty.dtype))));
    }
    if let Ok(strides) = cai.get_item("strides") {
        if !strides.is_none() {
            let strides: Vec<isize> =
                strides.extract().map_err(|_| bad("__cuda_array_interface__ 'strides' is not a tuple".into()))?;
            let mut expected = vec![0isize; shape.len()];
            let mut step = ty.dtype.size() as isize;
            for (i, &d) in shape.iter().enumerate().rev() {
                expected[i] = step;
                step *= d as isize;
            }
            let same = strides.iter().zip(&expected).zip(&shape).all(|((s, e), &d)| s == e || d == 1);
            if strides.len() != shape.len() || !same {
                return Err(bad("not C-contiguous (call .contiguous() or cupy.ascontiguousarray first)".into()));
            }
        }
    }
    if let Ok(mask) = cai.get_item("mask") {
        if !mask.is_none() {
            return Err(bad("masked arrays are not supported".into()));
        }
    }
    if writable && readonly {
        return Err(bad("the array is read-only and cannot receive an output".into()));
    }
    if address == 0 && ty.bytes() > 0 {
        return Err(bad("null device address".into()));
    }
    Ok(address)
}

/// numpy's name of a dtype given by its `typestr` (`<f4` → float32).
fn numpy_dtype_name_of(py: Python<'_>, typestr: &str) -> Option<String> {
    let dtype = py.import("numpy").ok()?.getattr("dtype").ok()?.call1((typestr,)).ok()?;
    dtype.getattr("name").ok()?.extract().ok()
}
