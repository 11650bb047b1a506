"""The measured real camera: fitted factors (`fit`), the model and its file (`model`), the image
operators (`ops`) and the counterfactual attribution of each encoder's gap (`attribution`)."""

from perception_gap.camera.model import CameraModel, Factor, apply_camera_model, load_camera_model

__all__ = ["CameraModel", "Factor", "apply_camera_model", "load_camera_model"]
