//! The 8-bit float formats ONNX defines (opset 19): decoding to f32, which
//! holds each of their values exactly, and encoding with round to nearest
//! even and ONNX's saturation rules.
//!
//! | format   | exponent bits, bias | infinity | NaN            | largest finite |
//! |----------|---------------------|----------|----------------|----------------|
//! | E4M3FN   | 4, 7                | none     | S.1111.111     | 448            |
//! | E4M3FNUZ | 4, 8                | none     | 0x80           | 240            |
//! | E5M2     | 5, 15               | S.11111.00 | S.11111.{01,10,11} | 57344    |
//! | E5M2FNUZ | 5, 16               | none     | 0x80           | 57344          |
//!
//! The `FNUZ` formats have no negative zero (0x80 is their NaN), so a
//! negative value that rounds to zero encodes as +0.
//!
//! Encoding rounds the exact value to the format's precision first and
//! then looks at range: a rounded magnitude above the largest finite value
//! saturates to it (`saturate`, ONNX's default), else becomes infinity
//! (E5M2) or NaN (the others); an infinite input is treated the same way.
//! (The Cast spec's table makes a saturated infinity NaN for the `FNUZ`
//! formats, but onnx's reference implementation and its test data saturate
//! it to the largest value like the others; trtc follows the data.)

use crate::dtype::DType;

/// One of the four 8-bit float formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Float8 {
    E4M3FN,
    E4M3FNUZ,
    E5M2,
    E5M2FNUZ,
}

impl Float8 {
    /// The format a dtype stores, if it is an 8-bit float.
    pub fn of(dtype: DType) -> Option<Float8> {
        match dtype {
            DType::F8E4M3FN => Some(Float8::E4M3FN),
            DType::F8E4M3FNUZ => Some(Float8::E4M3FNUZ),
            DType::F8E5M2 => Some(Float8::E5M2),
            DType::F8E5M2FNUZ => Some(Float8::E5M2FNUZ),
            _ => None,
        }
    }

    fn mantissa_bits(self) -> i32 {
        match self {
            Float8::E4M3FN | Float8::E4M3FNUZ => 3,
            Float8::E5M2 | Float8::E5M2FNUZ => 2,
        }
    }

    fn bias(self) -> i32 {
        match self {
            Float8::E4M3FN => 7,
            Float8::E4M3FNUZ => 8,
            Float8::E5M2 => 15,
            Float8::E5M2FNUZ => 16,
        }
    }

    /// Whether 0x80 is NaN and there is no negative zero.
    fn unsigned_zero(self) -> bool {
        matches!(self, Float8::E4M3FNUZ | Float8::E5M2FNUZ)
    }

    /// The largest finite value.
    pub fn max(self) -> f32 {
        match self {
            Float8::E4M3FN => 448.0,
            Float8::E4M3FNUZ => 240.0,
            Float8::E5M2 | Float8::E5M2FNUZ => 57344.0,
        }
    }

    fn nan(self, negative: bool) -> u8 {
        if self.unsigned_zero() {
            0x80
        } else {
            0x7f | sign_bit(negative)
        }
    }

    /// The exact value of `bits`.
    pub fn decode(self, bits: u8) -> f32 {
        if self.unsigned_zero() && bits == 0x80 {
            return f32::NAN;
        }
        let m = self.mantissa_bits();
        let exponent = i32::from((bits & 0x7f) >> m);
        let mantissa = i32::from(bits) & ((1 << m) - 1);
        let all_ones = (1 << (7 - m)) - 1;
        let magnitude = match self {
            Float8::E5M2 if exponent == all_ones => {
                if mantissa == 0 {
                    f32::INFINITY
                } else {
                    f32::NAN
                }
            }
            Float8::E4M3FN if exponent == all_ones && mantissa == 7 => f32::NAN,
            // Subnormals: no implicit leading one, the smallest exponent.
            _ if exponent == 0 => mantissa as f32 * pow2(1 - self.bias() - m),
            _ => (mantissa + (1 << m)) as f32 * pow2(exponent - self.bias() - m),
        };
        if bits & 0x80 != 0 {
            -magnitude
        } else {
            magnitude
        }
    }

    /// The bits of `x` rounded to nearest even; see the module's notes for
    /// what happens out of range.
    pub fn encode(self, x: f64, saturate: bool) -> u8 {
        let negative = x.is_sign_negative();
        if x.is_nan() {
            return self.nan(negative);
        }
        let overflow = || {
            if saturate {
                self.encode_exact(f64::from(self.max()), negative)
            } else if self == Float8::E5M2 {
                0x7c | sign_bit(negative)
            } else {
                self.nan(negative)
            }
        };
        let a = x.abs();
        if a >= 2.0 * f64::from(self.max()) {
            // Infinite or far out of range (and outside what `pow2` below
            // covers).
            return overflow();
        }
        let m = self.mantissa_bits();
        let min_exponent = 1 - self.bias();
        // The spacing of representable values around `a`: 2^(e - m) for a
        // normal value of exponent e, fixed below the smallest normal.
        let quantum = f64::from(pow2(exponent_of(a).max(min_exponent) - m));
        let rounded = (a / quantum).round_ties_even() * quantum;
        if rounded > f64::from(self.max()) {
            return overflow();
        }
        self.encode_exact(rounded, negative)
    }

    /// Bits of a magnitude the format holds exactly, with a sign.
    fn encode_exact(self, magnitude: f64, negative: bool) -> u8 {
        if magnitude == 0.0 {
            return if self.unsigned_zero() { 0 } else { sign_bit(negative) };
        }
        let m = self.mantissa_bits();
        let min_exponent = 1 - self.bias();
        let e = exponent_of(magnitude);
        let (field, mantissa) = if e < min_exponent {
            (0, magnitude / f64::from(pow2(min_exponent - m)))
        } else {
            (e + self.bias(), magnitude / f64::from(pow2(e - m)) - f64::from(1 << m))
        };
        ((field << m) as u8 | mantissa as u8) | sign_bit(negative)
    }
}

fn sign_bit(negative: bool) -> u8 {
    if negative {
        0x80
    } else {
        0
    }
}

/// 2^k for the small exponents these formats need (|k| < 30).
fn pow2(k: i32) -> f32 {
    f32::from_bits(((127 + k) as u32) << 23)
}

/// floor(log2(a)) for a positive finite f64 (subnormal f64s give the
/// smallest normal exponent, far below any 8-bit float's).
fn exponent_of(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Float8; 4] = [Float8::E4M3FN, Float8::E4M3FNUZ, Float8::E5M2, Float8::E5M2FNUZ];

    #[test]
    fn every_finite_value_round_trips() {
        for f in ALL {
            for bits in 0..=255u8 {
                let v = f.decode(bits);
                if v.is_nan() {
                    continue;
                }
                assert_eq!(f.encode(f64::from(v), false), bits, "{f:?} {bits:#04x} = {v}");
            }
        }
    }

    #[test]
    fn largest_values_and_specials() {
        assert_eq!(Float8::E4M3FN.decode(0x7e), 448.0);
        assert!(Float8::E4M3FN.decode(0x7f).is_nan());
        assert_eq!(Float8::E4M3FNUZ.decode(0x7f), 240.0);
        assert!(Float8::E4M3FNUZ.decode(0x80).is_nan());
        assert_eq!(Float8::E5M2.decode(0x7b), 57344.0);
        assert_eq!(Float8::E5M2.decode(0xfc), f32::NEG_INFINITY);
        assert_eq!(Float8::E5M2FNUZ.decode(0x7f), 57344.0);
        // Smallest subnormals: 2^-9, 2^-10, 2^-16, 2^-17.
        assert_eq!(Float8::E4M3FN.decode(1), 2f32.powi(-9));
        assert_eq!(Float8::E4M3FNUZ.decode(1), 2f32.powi(-10));
        assert_eq!(Float8::E5M2.decode(1), 2f32.powi(-16));
        assert_eq!(Float8::E5M2FNUZ.decode(1), 2f32.powi(-17));
    }

    #[test]
    fn rounds_to_nearest_even() {
        // 1.0625 lies halfway between 1.0 and 1.125 in E4M3: the even
        // mantissa (1.0) wins; a hair above goes up.
        assert_eq!(Float8::E4M3FN.decode(Float8::E4M3FN.encode(1.0625, true)), 1.0);
        assert_eq!(Float8::E4M3FN.decode(Float8::E4M3FN.encode(1.0626, true)), 1.125);
        // 464 is halfway between 448 and 480 (not representable): even wins.
        assert_eq!(Float8::E4M3FN.encode(464.0, false), 0x7e);
        // Half the smallest subnormal rounds to zero; a hair above, up.
        assert_eq!(Float8::E4M3FN.encode(2f64.powi(-10), true), 0);
        assert_eq!(Float8::E4M3FN.encode(2f64.powi(-10) * 1.01, true), 1);
    }

    #[test]
    fn saturation_follows_the_spec_table() {
        let big = 1e6;
        assert_eq!(Float8::E4M3FN.encode(big, true), 0x7e);
        assert!(Float8::E4M3FN.decode(Float8::E4M3FN.encode(big, false)).is_nan());
        assert_eq!(Float8::E4M3FN.encode(f64::NEG_INFINITY, true), 0xfe);
        assert_eq!(Float8::E4M3FNUZ.encode(f64::INFINITY, true), 0x7f);
        assert!(Float8::E4M3FNUZ.decode(Float8::E4M3FNUZ.encode(f64::INFINITY, false)).is_nan());
        assert_eq!(Float8::E5M2.encode(big, true), 0x7b);
        assert_eq!(Float8::E5M2.decode(Float8::E5M2.encode(-big, false)), f32::NEG_INFINITY);
        assert_eq!(Float8::E5M2.decode(Float8::E5M2.encode(f64::INFINITY, false)), f32::INFINITY);
        assert!(Float8::E5M2FNUZ.decode(Float8::E5M2FNUZ.encode(big, false)).is_nan());
        assert_eq!(Float8::E5M2FNUZ.encode(-big, true), 0xff);
    }

    #[test]
    fn negative_zero_only_where_the_format_has_it() {
        assert_eq!(Float8::E4M3FN.encode(-0.0, true), 0x80);
        assert_eq!(Float8::E5M2.encode(-1e-30, true), 0x80);
        assert_eq!(Float8::E4M3FNUZ.encode(-0.0, true), 0);
        assert_eq!(Float8::E5M2FNUZ.encode(-1e-30, true), 0);
    }
}
