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

/// One parameter before it has values: where [`Mlp::build`] puts it and how it is drawn.
struct Slot {
    name: String,
    shape: Vec<i64>,
    init: Init,
    decay: bool,
}

enum Init {
    Normal,
    /// U(-bound, bound).
    Uniform(f64),
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

    fn build(arch: Architecture, rng: Option<rand_chacha::ChaCha8Rng>, device: Device) -> Mlp {
        let layout = Mlp::layout(&arch);
        let total: i64 = layout.iter().map(|p| p.shape.iter().product::<i64>()).sum();
        let flat = match rng {
            Some(mut rng) => {
                // Drawn in layout order: embeddings N(0, 1), then each layer's weight and bias
                // U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's default for linear layers.
                let mut values: Vec<f32> = Vec::with_capacity(total as usize);
                for p in &layout {
                    let n: i64 = p.shape.iter().product();
                    match p.init {
                        Init::Normal => values.extend((0..n).map(|_| {
                            let x: f64 = StandardNormal.sample(&mut rng);
                            x as f32
                        })),
                        Init::Uniform(bound) => {
                            values.extend((0..n).map(|_| rng.random_range(-bound..bound) as f32))
                        }
                    }
                }
                Tensor::from_slice(&values).to_device(device)
            }
            // Straight into zeroed memory: building the values in a vector and copying them
            // took most of a resume's 9 ms for a [1024, 1024] model.
            None => Tensor::zeros([total], (Kind::Float, device)),
        };
        let mut offset = 0;
        let layout: Vec<(String, Vec<i64>, i64, bool)> = layout
            .into_iter()
            .map(|p| {
                let start = offset;
                offset += p.shape.iter().product::<i64>();
                (p.name, p.shape, start, p.decay)
            })
            .collect();
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

    /// Every parameter's name, shape, initialisation and decay, in the flat order.
    fn layout(arch: &Architecture) -> Vec<Slot> {
        let mut slots = Vec::new();
        for (i, &card) in arch.cardinalities.iter().enumerate() {
            slots.push(Slot {
                name: format!("embedding.{i}"),
                shape: vec![card, arch.embedding_dim],
                init: Init::Normal,
                decay: false,
            });
        }
        let mut width = arch.input_width();
        let layers = arch
            .hidden
            .iter()
            .enumerate()
            .map(|(k, &w)| (format!("hidden.{k}"), w))
            .chain(std::iter::once(("output".to_string(), 1)));
        for (name, out) in layers {
            let bound = 1.0 / (width.max(1) as f64).sqrt();
            slots.push(Slot {
                name: format!("{name}.weight"),
                shape: vec![out, width],
                init: Init::Uniform(bound),
                decay: true,
            });
            slots.push(Slot {
                name: format!("{name}.bias"),
                shape: vec![out],
                init: Init::Uniform(bound),
                decay: false,
            });
            width = out;
        }
        slots
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
        let _guard = tch::no_grad_guard();
        let mask = Tensor::zeros(
            [self.flat.numel() as i64],
            (Kind::Float, self.flat.device()),
        );
        for p in self.params.iter().filter(|p| p.decay) {
            let _ = mask.narrow(0, p.offset, p.numel).fill_(1.0);
        }
        mask
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
