"""Names of the built-in datasets that light modules need: read here, they cost no numpy,
so the configurations and the command line name the datasets without loading a reader."""

TABULAR_NAMES = (
    "ecoli",
    "user_knowledge_modeling",
    "statlog_vehicle",
    "hcv_egypt",
    "yeast",
    "cardiotocography",
    "statlog_landsat",
    "wine_quality",
    "pendigits",
    "letter_recognition",
)
"""The UCI tables (:mod:`fedprune.data.uci_tabular`), in the order of Fed-HIRE's Table 2."""
