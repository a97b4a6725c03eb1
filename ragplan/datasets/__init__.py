"""Question-answering datasets as the files users download, read into one :class:`QAExample` shape."""

from ragplan.datasets.qa import (
    FORMATS, DatasetError, QAExample, detect_format, infer_kind, load_qa, read_records, resolve_data_file,
)

__all__ = ["FORMATS", "DatasetError", "QAExample", "detect_format", "infer_kind", "load_qa", "read_records",
           "resolve_data_file"]
