//! The codec of every roncho.v1 RPC: prost's, except that a request that is
//! not a valid protobuf message (truncated, bad UTF-8 in a string, nested
//! past the decoder's recursion limit) is `INVALID_ARGUMENT`, the caller's
//! fault, where prost's codec answers `INTERNAL` and reads as a server bug.

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::{Code, Status};

/// prost's codec with decode failures reported as `INVALID_ARGUMENT`.
#[derive(Debug, Clone)]
pub struct ProstCodec<T, U> {
    inner: tonic_prost::ProstCodec<T, U>,
}

impl<T, U> Default for ProstCodec<T, U> {
    fn default() -> Self {
        Self {
            inner: tonic_prost::ProstCodec::default(),
        }
    }
}

impl<T, U> Codec for ProstCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <tonic_prost::ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = InvalidArgumentDecoder<<tonic_prost::ProstCodec<T, U> as Codec>::Decoder, U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.inner.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        InvalidArgumentDecoder {
            inner: self.inner.decoder(),
            item: PhantomData,
        }
    }
}

/// A decoder whose `INTERNAL` failures (prost's decode errors: the bytes
/// are not the message) become `INVALID_ARGUMENT` with the same reason.
#[derive(Debug)]
pub struct InvalidArgumentDecoder<D, U> {
    inner: D,
    item: PhantomData<fn() -> U>,
}

impl<D, U> Decoder for InvalidArgumentDecoder<D, U>
where
    D: Decoder<Item = U, Error = Status>,
{
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.inner.decode(buf).map_err(|status| match status.code() {
            Code::Internal => Status::invalid_argument(format!(
                "the message is not a valid protobuf encoding of its type: {}",
                status.message()
            )),
            _ => status,
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.inner.buffer_settings()
    }
}
