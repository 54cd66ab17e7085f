"""fedprune: clustered, pruned federated learning on TensorFlow Federated, for edge devices."""

import warnings

# scipy 1.9.3 (pinned by tensorflow-federated 0.87) declares numpy<1.26 but runs on numpy 1.26;
# see requirements/stack-nodeps.txt.
warnings.filterwarnings("ignore", message="A NumPy version >=", category=UserWarning)

__version__ = "0.1.0"
