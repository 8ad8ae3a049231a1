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
    /// A view into `Mlp::flat`: updating the flat buffer updates the parameter.
    pub tensor: Tensor,
    /// Where the view starts in the flat buffer, and its length.
    pub offset: i64,
    pub numel: i64,
    /// Weight decay applies to layer weights only, not to biases and embeddings.
    pub decay: bool,
}

#[derive(Debug)]
pub struct Mlp {
    pub arch: Architecture,
    /// Every parameter in one contiguous buffer, so the optimizer (and a gradient all-reduce)
    /// runs a handful of kernels over one tensor rather than a handful per parameter.
    pub flat: Tensor,
    pub params: Vec<Param>,
    /// Matrix products in bf16 (fp32 master weights and loss); set on CUDA with `--bf16`.
    pub compute: Kind,
}

impl Mlp {
    /// A model initialised from the seed's `init` stream.
    pub fn new(arch: Architecture, seed: u64, device: Device) -> Mlp {
        Mlp::build(arch, Some(seeds::rng(seed, "init", &[])), device)
    }

    /// A model with zero parameters, to be overwritten by `load` (skips drawing the initial
    /// weights, which a restart would throw away).
    pub fn zeroed(arch: Architecture, device: Device) -> Mlp {
        Mlp::build(arch, None, device)
    }

    fn build(arch: Architecture, mut rng: Option<rand_chacha::ChaCha8Rng>, device: Device) -> Mlp {
        let mut values: Vec<f32> = Vec::new();
        let mut layout: Vec<(String, Vec<i64>, i64, bool)> = Vec::new();
        let mut push = |name: String, shape: Vec<i64>, data: Vec<f32>, decay: bool| {
            layout.push((name, shape, values.len() as i64, decay));
            values.extend(data);
        };
        for (i, &card) in arch.cardinalities.iter().enumerate() {
            let n = (card * arch.embedding_dim) as usize;
            let data = match &mut rng {
                Some(rng) => (0..n)
                    .map(|_| {
                        let x: f64 = StandardNormal.sample(rng);
                        x as f32
                    })
                    .collect(),
                None => vec![0.0; n],
            };
            push(
                format!("embedding.{i}"),
                vec![card, arch.embedding_dim],
                data,
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
                match &mut rng {
                    Some(rng) => (0..n)
                        .map(|_| rng.random_range(-bound..bound) as f32)
                        .collect(),
                    None => vec![0.0; n as usize],
                }
            };
            let weight = uniform(out * width);
            let bias = uniform(out);
            push(format!("{name}.weight"), vec![out, width], weight, true);
            push(format!("{name}.bias"), vec![out], bias, false);
            width = out;
        }
        let flat = Tensor::from_slice(&values).to_device(device);
        let params = layout
            .into_iter()
            .map(|(name, shape, offset, decay)| {
                let numel: i64 = shape.iter().product();
                // A view of a tensor that needs no gradient is a leaf, so it can require one.
                let tensor = flat
                    .narrow(0, offset, numel)
                    .view(shape.as_slice())
                    .set_requires_grad(true);
                Param {
                    name,
                    tensor,
                    offset,
                    numel,
                    decay,
                }
            })
            .collect();
        Mlp {
            arch,
            flat,
            params,
            compute: Kind::Float,
        }
    }

    /// Every parameter's gradient in one flat tensor laid out like `flat` (zeros where a
    /// parameter got none).
    pub fn flat_grad(&self) -> Tensor {
        let parts: Vec<Tensor> = self
            .params
            .iter()
            .map(|p| {
                let g = p.tensor.grad();
                if g.defined() {
                    g.reshape([-1])
                } else {
                    Tensor::zeros([p.numel], (Kind::Float, self.flat.device()))
                }
            })
            .collect();
        Tensor::cat(&parts, 0)
    }

    /// 1 where weight decay applies, 0 elsewhere, laid out like `flat`.
    pub fn decay_mask(&self) -> Tensor {
        let mut mask = vec![0f32; self.flat.numel()];
        for p in &self.params {
            if p.decay {
                mask[p.offset as usize..(p.offset + p.numel) as usize].fill(1.0);
            }
        }
        Tensor::from_slice(&mask).to_device(self.flat.device())
    }

    pub fn zero_grad(&mut self) {
        for p in &mut self.params {
            p.tensor.zero_grad();
        }
    }

    /// Logits `[rows]` for numeric `[rows, numeric]` and categorical `[rows, strings]` inputs.
    /// `dropout` holds one keep-mask per hidden layer (values 0 or 1/(1-p), shaped
    /// `[rows, width]`) when training; `None` scores without dropout.
    pub fn forward(
        &self,
        numeric: &Tensor,
        categorical: &Tensor,
        dropout: Option<&[Tensor]>,
    ) -> Tensor {
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
                if let Some(mask) = dropout.and_then(|masks| masks.get(k)) {
                    // Out of place: relu saved its output for the backward pass.
                    x = x.g_mul(mask);
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
            p.tensor
                .copy_(&src.to_kind(Kind::Float).to_device(p.tensor.device()));
        }
        Ok(())
    }

    pub fn parameter_count(&self) -> i64 {
        self.params.iter().map(|p| p.tensor.numel() as i64).sum()
    }
}
