"""The table of pipeline methods: name -> (config factory, runner).

``ALGORITHMS[name] = (config factory, runner)`` for the clustered/pruned pipeline methods.
"""

from fedprune.algorithms.caafp import caafp_config, run_caafp
from fedprune.algorithms.efficientfl import efficientfl_config, run_efficientfl
from fedprune.algorithms.fedchar import fedchar_config, run_fedchar
from fedprune.algorithms.fedsnip import fedsnip_config, run_fedsnip
from fedprune.algorithms.global_ft import global_ft_config, run_global_ft

ALGORITHMS = {
    "caafp": (caafp_config, run_caafp),
    "global_ft": (global_ft_config, run_global_ft),
    "fedchar": (fedchar_config, run_fedchar),
    "efficientfl": (efficientfl_config, run_efficientfl),
    "fedsnip": (fedsnip_config, run_fedsnip),
}
