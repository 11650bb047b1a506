"""Old path of `perception_gap.metrics` (compatibility shim, removed by the lead)."""

from perception_gap.metrics.bootstrap import BOOT_MAX_SAMPLES, N_BOOT, bootstrap_ci  # noqa: F401
from perception_gap.metrics.bootstrap import centred_ci as _centred_ci  # noqa: F401
from perception_gap.metrics.centroid import (CENTROID_N_BOOT, DEFAULT_N_COMPONENTS, MIN_FLOOR_EPISODES,  # noqa: F401
                                             _centroid_parts, centroid_distance, centroid_distance_ci, noise_floor,
                                             noise_floor_halves)
from perception_gap.metrics.centroid import cluster_stats as _cluster_stats  # noqa: F401
from perception_gap.metrics.centroid import normed as _normed  # noqa: F401
from perception_gap.metrics.centroid import scaled_distance as _scaled_distance  # noqa: F401
from perception_gap.metrics.paired import pair_cosine_distances, paired_cosine  # noqa: F401
from perception_gap.metrics.projection import CHUNK_ROWS, MAX_FIT_ROWS, MAX_N_COMPONENTS, RANK_TOL  # noqa: F401
from perception_gap.metrics.projection import Projection as _Projection  # noqa: F401
from perception_gap.metrics.projection import Rows as _Rows  # noqa: F401
from perception_gap.metrics.projection import fit_projection as _fit_projection  # noqa: F401
from perception_gap.metrics.projection import gather_rows as _gather  # noqa: F401
from perception_gap.metrics.projection import pca_solver as _pca_solver  # noqa: F401
from perception_gap.metrics.projection import standardize_inplace as _standardize_inplace  # noqa: F401
from perception_gap.metrics.resampling import (N_BLOCKS, _is_unknown, _Unknown, _UNKNOWN, block_ids,  # noqa: F401
                                               cluster_labels, grouped_folds, resample_clusters)
from perception_gap.metrics.resampling import cluster_keys as _cluster_keys  # noqa: F401
from perception_gap.metrics.resampling import factorize as _factorize  # noqa: F401
from perception_gap.metrics.resampling import join_how as _join_how  # noqa: F401
from perception_gap.metrics.resampling import resample_labels as _resample  # noqa: F401
from perception_gap.metrics.resampling import subsample as _subsample  # noqa: F401
from perception_gap.metrics.results import CI, MMD, CentroidDistance, DomainAUC, NoiseFloor, PairedCosine  # noqa: F401
from perception_gap.metrics.twosample import (AUC_MAX_SAMPLES, AUC_MAX_SAMPLES_LIMIT, AUC_N_COMPONENTS,  # noqa: F401
                                              MMD_MAX_SAMPLES, MMD_MAX_SAMPLES_LIMIT, MMD_PERMUTATIONS, _median_sigma,
                                              _mmd2_batch, _sq_dists, domain_auc, median_bandwidth, mmd)
from perception_gap.metrics.validation import MIN_FRAMES as _MIN_FRAMES  # noqa: F401
from perception_gap.metrics.validation import check_embeddings as _check_embeddings  # noqa: F401
from perception_gap.metrics.validation import check_int as _check_int  # noqa: F401
from perception_gap.metrics.validation import check_level as _check_level  # noqa: F401
from perception_gap.metrics.validation import check_pair as _check_pair  # noqa: F401
from perception_gap.metrics.validation import draw_seed as _seed  # noqa: F401
from perception_gap.metrics.validation import make_rng as _rng  # noqa: F401
