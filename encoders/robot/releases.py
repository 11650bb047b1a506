"""What each robot encoder's authors release, as data: the file's nesting, key prefix, architecture
variants, the keys their loader discards, and the preprocessing their loading code applies.

Read from the authors' public loading code (not copied): R3M `r3m/__init__.py` + `models_r3m.py`,
VIP `vip/__init__.py` + `model_vip.py`, MVP `mvp/backbones/vit.py` + `model_zoo.py`, VC-1
`vc_models/models/vit/vit.py` + `conf/model/vc1_vit*.yaml` + `transforms/__init__.py`, MCR
`mcr/__init__.py` + `models_mcr.py`, HRP `data4robotics/load_pretrained.py` + `models/{vit,resnet,base}.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from perception_gap.encoders.preprocessing import Preprocessing

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# MAE pre-training checkpoints keep the decoder next to the encoder; every ViT loader here drops it.
MAE_DECODER = ("decoder_", "mask_token")


@dataclass(frozen=True)
class Variant:
    """One architecture a release comes in.

    Attributes:
        arch: "resnet" (torchvision ResNet, `fc` removed or replaced) or "vit" (timm
            VisionTransformer, patch 16, CLS token, LayerNorm eps 1e-6, qkv bias, MLP ratio 4).
        depth: ResNet depth (18, 34, 50) or the number of ViT blocks.
        width: ViT token width (0 for a ResNet).
        heads: ViT attention heads; they leave no trace in the weights' shapes, so they are the
            authors' builder's value, never inferred.
        norm: ResNet normalization, "batch" (torchvision's) or "group16" (GroupNorm, 16 groups).
        key_prefix: this variant's own key prefix, where it differs from the release's.
    """

    arch: str
    depth: int
    width: int = 0
    heads: int = 0
    norm: str = "batch"
    key_prefix: str | None = None

    @property
    def label(self) -> str:
        if self.arch == "resnet":
            return f"ResNet-{self.depth}" + (" (GroupNorm)" if self.norm != "batch" else "")
        heads = f", {self.heads} heads" if self.heads else ""
        return f"ViT/16 ({self.width}-d, {self.depth} blocks{heads})"


@dataclass(frozen=True)
class Release:
    """How one family's released checkpoint is laid out and read.

    Attributes:
        prefix: the name prefix without its colon (`r3m`).
        title: the family as its authors name it.
        variants: variant name -> architecture.
        file: what the authors release, for messages and docs.
        top_keys: the key(s) the state dict sits under in the file, any one of them (empty: the
            file is the state dict itself).
        key_prefix: what every kept key starts with (a DataParallel / wrapper module path).
        dropped: key prefixes (of the full key) the authors' loader discards before loading.
        head: "none" (pooled features) or "linear" (VIP keeps `fc`, a Linear to its hidden width).
        interpolation, resize_mode, crop_pct, antialias: the authors' resize (see `Preprocessing`).
        convention: how the authors' model takes its pixels, stated in the fingerprint.
    """

    prefix: str
    title: str
    variants: dict[str, Variant]
    file: str
    top_keys: tuple[str, ...]
    key_prefix: str = ""
    dropped: tuple[str, ...] = ()
    head: str = "none"
    interpolation: str = "bilinear"
    resize_mode: str = "shortest"
    crop_pct: float = 224 / 256
    antialias: bool = True
    convention: str = "RGB /255, ImageNet mean/std"

    @property
    def form(self) -> str:
        return f"{self.prefix}:{'|'.join(self.variants)}@PATH"

    def keys_start(self, variant: str) -> str:
        """What every kept key of `variant`'s state dict starts with."""
        own = self.variants[variant].key_prefix
        return self.key_prefix if own is None else own

    def preprocessing(self, size: int) -> Preprocessing:
        """The input the authors' pipeline feeds their model, at `size` x `size` pixels."""
        return Preprocessing(size=(size, size), interpolation=self.interpolation, resize_mode=self.resize_mode,
                             crop_pct=self.crop_pct, mean=IMAGENET_MEAN, std=IMAGENET_STD, input_scale=255.0,
                             antialias=self.antialias)


_RESNETS = {f"resnet{d}": Variant("resnet", d) for d in (18, 34, 50)}
# Inside R3M, VIP and MCR: pixels in [0, 255] as floats, x / 255 then ImageNet mean/std (the
# README examples resize the shortest side to 256 with Pillow's bilinear, then centre-crop 224).
_INSIDE = "RGB in [0, 255] as float, /255 and ImageNet mean/std inside the model"

RELEASES: dict[str, Release] = {r.prefix: r for r in (
    Release(
        "r3m", "R3M", _RESNETS, "load_r3m's ~/.r3m/r3m_18|34|50/model.pt", ("r3m",),
        key_prefix="module.convnet.", dropped=("module.lang_enc.", "module.lang_rew."), convention=_INSIDE),
    Release(
        "vip", "VIP", {"resnet50": Variant("resnet", 50)}, "load_vip's ~/.vip/resnet50/model.pt",
        ("vip",), key_prefix="module.convnet.", head="linear", convention=_INSIDE),
    # MCR's loader returns a bare torchvision ResNet-50 and its example feeds it x / 255 without
    # mean/std; the model was trained (and is evaluated) through its MCR module, which applies
    # ImageNet mean/std after /255 as R3M's does, so that is what the weights expect.
    Release(
        "mcr", "MCR", {"resnet50": Variant("resnet", 50)}, "mcr_resnet50.pth of Hugging Face GqJiang/robots-pretrain-robots",
        (), convention=_INSIDE),
    # MVP builds ViT-S with 12 heads (32-d each), not the usual 6; ViT-L is released at 256 px.
    # Its BC code crops a lower-centre square and resizes it bilinearly; for any frame: shortest
    # side to the input size, centre crop.
    Release(
        "mvp", "MVP", {"vits": Variant("vit", 12, 384, 12), "vitb": Variant("vit", 12, 768, 12),
                       "vitl": Variant("vit", 24, 1024, 16)},
        "mvp.load's vits-mae-hoi.pth, vitb-mae-egosoup.pth or vitl-256-mae-egosoup.pth", ("model",),
        dropped=MAE_DECODER + ("head.",), crop_pct=1.0),
    Release(
        "vc1", "VC-1", {"vitb": Variant("vit", 12, 768, 12), "vitl": Variant("vit", 24, 1024, 16)},
        "vc_models' vc1_vitb.pth or vc1_vitl.pth", ("model",),
        dropped=MAE_DECODER, interpolation="bicubic"),
    # HRP's loader (data4robotics) squashes any frame to 224 x 224 without antialiasing. Its
    # ResNet sits in a wrapper module as `_model`; its ViT is saved bare.
    Release(
        "hrp", "HRP", {"resnet18": Variant("resnet", 18, norm="group16", key_prefix="_model."),
                       "vit": Variant("vit", 12, 768, 12)},
        "data4robotics' visual_features/hrp/IN_hrp.pth for the ViT, visual_features/resnet18/*.pth for the ResNet-18",
        ("features", "model"), dropped=MAE_DECODER, resize_mode="squash", crop_pct=1.0, antialias=False),
)}
