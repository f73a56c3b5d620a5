"""autodiff-semantics: a cross-framework test suite for TensorFlow's autodiff semantics."""

__version__ = "0.1.0"
