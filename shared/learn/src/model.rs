//! The multilayer perceptron: standardized numeric features and one learned embedding per
//! string feature, concatenated, through ReLU layers with dropout, to one logit.
//!
//! Parameters are plain leaf tensors in a fixed order with stable names, initialised from a
//! ChaCha stream of the seed (not libtorch's generator), so the initial weights are the same on
//! every machine and the flat order is the same on every rank.

use anyhow::{Result, bail};
use rand::RngExt;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::seeds;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Architecture {
    pub numeric: i64,
    /// Vocabulary size (with the unknown bucket) of each string feature.
    pub cardinalities: Vec<i64>,
    pub embedding_dim: i64,
    pub hidden: Vec<i64>,
    pub dropout: f64,
}

impl Architecture {
    fn input_width(&self) -> i64 {
        self.numeric + self.embedding_dim * self.cardinalities.len() as i64
    }
}

#[derive(Debug)]
pub struct Param {
    pub name: String,
    pub tensor: Tensor,
    /// Weight decay applies to layer weights only, not to biases and embeddings.
    pub decay: bool,
}

#[derive(Debug)]
pub struct Mlp {
    pub arch: Architecture,
    pub params: Vec<Param>,
    /// Matrix products in bf16 (fp32 master weights and loss); set on CUDA with `--bf16`.
    pub compute: Kind,
}

impl Mlp {
    pub fn new(arch: Architecture, seed: u64, device: Device) -> Mlp {
        let mut rng = seeds::rng(seed, "init", &[]);
        let mut params = Vec::new();
        let mut make = |name: String, shape: &[i64], values: Vec<f32>, decay: bool| {
            let tensor = Tensor::from_slice(&values)
                .reshape(shape)
                .to_device(device)
                .set_requires_grad(true);
            params.push(Param {
                name,
                tensor,
                decay,
            });
        };
        for (i, &card) in arch.cardinalities.iter().enumerate() {
            let n = (card * arch.embedding_dim) as usize;
            let values = (0..n)
                .map(|_| {
                    let x: f64 = StandardNormal.sample(&mut rng);
                    x as f32
                })
                .collect();
            make(
                format!("embedding.{i}"),
                &[card, arch.embedding_dim],
                values,
                false,
            );
        }
        let mut width = arch.input_width();
        let layers: Vec<(String, i64)> = arch
            .hidden
            .iter()
            .enumerate()
            .map(|(k, &w)| (format!("hidden.{k}"), w))
            .chain(std::iter::once(("output".to_string(), 1)))
            .collect();
        for (name, out) in layers {
            // PyTorch's default for linear layers: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
            let bound = 1.0 / (width.max(1) as f64).sqrt();
            let mut uniform = |n: i64| -> Vec<f32> {
                (0..n)
                    .map(|_| rng.random_range(-bound..bound) as f32)
                    .collect()
            };
            let weight = uniform(out * width);
            let bias = uniform(out);
            make(format!("{name}.weight"), &[out, width], weight, true);
            make(format!("{name}.bias"), &[out], bias, false);
            width = out;
        }
        Mlp {
            arch,
            params,
            compute: Kind::Float,
        }
    }

    /// Logits `[rows]` for numeric `[rows, numeric]` and categorical `[rows, strings]` inputs.
    pub fn forward(&self, numeric: &Tensor, categorical: &Tensor, train: bool) -> Tensor {
        let n_emb = self.arch.cardinalities.len();
        let mut parts = Vec::with_capacity(1 + n_emb);
        if self.arch.numeric > 0 {
            parts.push(numeric.shallow_clone());
        }
        for i in 0..n_emb {
            let index = categorical.select(1, i as i64);
            parts.push(Tensor::embedding(
                &self.params[i].tensor,
                &index,
                -1,
                false,
                false,
            ));
        }
        let mut x = Tensor::cat(&parts, 1);
        let layers = &self.params[n_emb..];
        let n_layers = layers.len() / 2;
        for k in 0..n_layers {
            let (w, b) = (&layers[2 * k].tensor, &layers[2 * k + 1].tensor);
            x = self.linear(&x, w, b);
            if k + 1 < n_layers {
                x = x.relu();
                if self.arch.dropout > 0.0 {
                    x = x.dropout(self.arch.dropout, train);
                }
            }
        }
        x.squeeze_dim(1)
    }

    fn linear(&self, x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
        if self.compute == Kind::Float {
            x.linear(w, Some(b))
        } else {
            let c = self.compute;
            x.to_kind(c)
                .linear(&w.to_kind(c), Some(&b.to_kind(c)))
                .to_kind(Kind::Float)
        }
    }

    pub fn named(&self) -> Vec<(String, &Tensor)> {
        self.params
            .iter()
            .map(|p| (p.name.clone(), &p.tensor))
            .collect()
    }

    /// Copies `tensors` (by name, shapes checked) into the parameters.
    pub fn load(&mut self, tensors: &[(String, Tensor)], prefix: &str, origin: &str) -> Result<()> {
        let _guard = tch::no_grad_guard();
        for p in &mut self.params {
            let key = format!("{prefix}{}", p.name);
            let Some((_, src)) = tensors.iter().find(|(n, _)| *n == key) else {
                bail!("{origin}: has no tensor `{key}` (another architecture?)");
            };
            if src.size() != p.tensor.size() {
                bail!(
                    "{origin}: tensor `{key}` has shape {:?}, the model expects {:?} (another architecture or preprocessing)",
                    src.size(),
                    p.tensor.size()
                );
            }
            p.tensor.copy_(&src.to_kind(Kind::Float));
        }
        Ok(())
    }

    pub fn parameter_count(&self) -> i64 {
        self.params.iter().map(|p| p.tensor.numel() as i64).sum()
    }
}
