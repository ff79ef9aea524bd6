//! Fixed-width serde forms for the state's hashes and min-values, used by checkpoints and the
//! split stages' internal records (both postcard): postcard writes an integer as a varint,
//! which takes more bytes than the integer for a random hash (10 for a `u64`, 19 for a
//! `u128`, 3 for most `u16`s) and a call per value; these write an array as its bytes, read
//! back in one piece. (Scalars use `postcard::fixint::le`.)

/// `[u8; N]` as `N` bytes.
pub(crate) mod bytes {
    pub fn serialize<S: serde::Serializer, const N: usize>(
        v: &[u8; N],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>, const N: usize>(
        d: D,
    ) -> Result<[u8; N], D::Error> {
        super::read(d, N, |b: &[u8]| b.try_into().expect("N bytes"))
    }
}

/// An integer written in its little-endian bytes.
pub(crate) trait Le: Copy + Default {
    /// Its width in bytes.
    const WIDTH: usize;
    fn bytes(self) -> impl Iterator<Item = u8>;
    fn from(bytes: &[u8]) -> Self;
}

macro_rules! le {
    ($($t:ty),*) => {$(
        impl Le for $t {
            const WIDTH: usize = std::mem::size_of::<$t>();
            fn bytes(self) -> impl Iterator<Item = u8> {
                self.to_le_bytes().into_iter()
            }
            fn from(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("its width"))
            }
        }
    )*};
}
le!(u16, u32, u64);

/// `[T; N]` of integers as their `N × width` bytes, little-endian.
pub(crate) mod le {
    use super::Le;

    pub fn serialize<S: serde::Serializer, T: Le, const N: usize>(
        v: &[T; N],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        super::write(s, v.iter().flat_map(|x| x.bytes()), T::WIDTH * N)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>, T: Le, const N: usize>(
        d: D,
    ) -> Result<[T; N], D::Error> {
        super::read(d, T::WIDTH * N, |b: &[u8]| {
            let mut v = [T::default(); N];
            for (x, c) in v.iter_mut().zip(b.chunks_exact(T::WIDTH)) {
                *x = T::from(c);
            }
            v
        })
    }
}

/// Writes `len` bytes as one byte string, from a buffer on the stack when they fit in one.
fn write<S: serde::Serializer>(
    s: S,
    bytes: impl Iterator<Item = u8>,
    len: usize,
) -> Result<S::Ok, S::Error> {
    let mut stack = [0u8; 512];
    if len <= stack.len() {
        let mut n = 0;
        for (b, x) in stack.iter_mut().zip(bytes) {
            *b = x;
            n += 1;
        }
        s.serialize_bytes(&stack[..n])
    } else {
        s.serialize_bytes(&bytes.collect::<Vec<u8>>())
    }
}

/// Reads a byte string of exactly `len` bytes and makes a `T` of it.
fn read<'de, D: serde::Deserializer<'de>, T>(
    d: D,
    len: usize,
    make: impl FnOnce(&[u8]) -> T,
) -> Result<T, D::Error> {
    struct Bytes<T, F>(usize, F, std::marker::PhantomData<T>);
    impl<'de, T, F: FnOnce(&[u8]) -> T> serde::de::Visitor<'de> for Bytes<T, F> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "{} bytes", self.0)
        }
        fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<T, E> {
            if bytes.len() != self.0 {
                return Err(E::invalid_length(bytes.len(), &self));
            }
            Ok((self.1)(bytes))
        }
        /// A self-describing format (JSON: the key shards' steps in the tests) writes bytes
        /// as a sequence of numbers.
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
            let mut bytes = Vec::with_capacity(self.0);
            while let Some(b) = seq.next_element::<u8>()? {
                bytes.push(b);
            }
            self.visit_bytes(&bytes)
        }
    }
    d.deserialize_bytes(Bytes(len, make, std::marker::PhantomData))
}

#[cfg(test)]
mod tests {
    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Arrays {
        #[serde(with = "super::bytes")]
        a: [u8; 5],
        #[serde(with = "super::le")]
        b: [u16; 3],
        #[serde(with = "super::le")]
        c: [u64; 2],
    }

    /// Larger than the stack buffer.
    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Big(#[serde(with = "super::le")] [u64; 100]);

    #[test]
    fn arrays_round_trip_as_their_bytes_and_wrong_lengths_are_refused() {
        let v = Arrays {
            a: [1, 2, 3, 250, 255],
            b: [0, 0x1234, u16::MAX],
            c: [u64::MAX, 0x0102_0304_0506_0708],
        };
        let bytes = postcard::to_stdvec(&v).unwrap();
        // A length byte and the bytes of each array: no varints.
        assert_eq!(bytes.len(), (1 + 5) + (1 + 6) + (1 + 16));
        assert_eq!(&bytes[1..6], &[1, 2, 3, 250, 255]);
        assert_eq!(&bytes[7..13], &[0, 0, 0x34, 0x12, 0xff, 0xff]);
        assert_eq!(postcard::from_bytes::<Arrays>(&bytes).unwrap(), v);
        let mut short = bytes.clone();
        short[0] = 4;
        short.remove(5);
        assert!(postcard::from_bytes::<Arrays>(&short).is_err());
        let big = Big(std::array::from_fn(|i| (i as u64) << 40 | i as u64));
        let bytes = postcard::to_stdvec(&big).unwrap();
        assert_eq!(bytes.len(), 2 + 800);
        assert_eq!(postcard::from_bytes::<Big>(&bytes).unwrap(), big);
        // A self-describing format reads them back too.
        let json = serde_json::to_string(&v).unwrap();
        assert_eq!(serde_json::from_str::<Arrays>(&json).unwrap(), v);
        assert!(serde_json::from_str::<Arrays>(&json.replace("[1,2,3,250,255]", "[1,2]")).is_err());
    }
}
