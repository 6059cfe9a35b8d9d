//! The `Embedder` contract suite (feature `testing`): every embedder runs
//! these checks through [`embedder_contract!`](crate::embedder_contract).
//! They hold for any model: shapes, unit length, order, determinism, empty
//! batches. Whether a model captures meaning is each model's own test.

use std::future::Future;
use std::pin::Pin;

use crate::embed::{Embedder, cosine};

/// One contract check over an embedder the caller provides.
pub type Check = for<'a> fn(&'a dyn Embedder) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Generates one `#[tokio::test]` per contract check in module `$module`,
/// each calling `$run(check).await`, where `$run` builds the embedder, runs
/// the [`Check`] on it and cleans up.
#[macro_export]
macro_rules! embedder_contract {
    ($module:ident, $run:path) => {
        mod $module {
            $crate::embedder_contract!(@tests $run;
                vectors_have_the_dimension_and_unit_length,
                order_is_kept_and_results_are_deterministic,
                an_empty_batch_is_empty,
            );
        }
    };
    (@tests $run:path; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $check() {
                $run(|embedder| Box::pin($crate::embed::contract::$check(embedder))).await;
            }
        )*
    };
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

pub async fn vectors_have_the_dimension_and_unit_length(embedder: &dyn Embedder) {
    let long = "a long message about gardens and tomatoes. ".repeat(60);
    let inputs = texts(&[
        "hello",
        "Caroline: I went to the LGBTQ support group yesterday!",
        "ünïcödé, emoji 🌱 and \"quotes\" (with) punctuation: AND OR NOT *",
        &long,
        "x",
    ]);
    let vectors = embedder.embed(&inputs).await.expect("embed");
    assert_eq!(vectors.len(), inputs.len(), "one vector per text");
    for (text, vector) in inputs.iter().zip(&vectors) {
        assert_eq!(vector.len(), embedder.dimensions(), "dimension of {text:?}");
        assert!(
            vector.iter().all(|value| value.is_finite()),
            "finite values for {text:?}"
        );
        let norm = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-3, "unit length for {text:?}: {norm}");
    }
    assert!(!embedder.model_id().is_empty());
}

pub async fn order_is_kept_and_results_are_deterministic(embedder: &dyn Embedder) {
    let a = "We hiked the ridge trail on Sunday";
    let b = "My sister plays the cello in an orchestra";
    let vectors = embedder.embed(&texts(&[a, b, a])).await.expect("embed");
    assert!(
        cosine(&vectors[0], &vectors[2]) > 0.9999,
        "the same text, the same vector"
    );
    assert!(
        cosine(&vectors[0], &vectors[1]) < 0.99,
        "different texts, different vectors"
    );
    let alone = embedder.embed(&texts(&[b])).await.expect("embed");
    assert!(
        cosine(&alone[0], &vectors[1]) > 0.9999,
        "a text's vector does not depend on its batch or position"
    );
}

pub async fn an_empty_batch_is_empty(embedder: &dyn Embedder) {
    assert!(embedder.embed(&[]).await.expect("embed").is_empty());
}
