"""The layers of ember.nn, a file per family (torch.nn.modules' layout)."""
from .module import Module  # noqa: F401
from .container import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict  # noqa: F401
from .linear import Identity, Linear, Bilinear  # noqa: F401
from .flatten import Flatten, Unflatten  # noqa: F401
from .activation import (ReLU, Sigmoid, Tanh, GELU, SiLU, Mish, Softplus, Softsign, ELU, SELU, CELU,  # noqa: F401
                         LeakyReLU, Hardtanh, ReLU6, Hardswish, Hardsigmoid, LogSigmoid, Threshold, GLU)
from .normalization import LayerNorm, RMSNorm  # noqa: F401
from .sparse import Embedding  # noqa: F401
from .dropout import Dropout, Dropout1d, Dropout2d  # noqa: F401
from .loss import *  # noqa: F401,F403  (CrossEntropyLoss, MSELoss, ... CosineSimilarity, PairwiseDistance)
from .softmax import Softmax, LogSoftmax, Softmin  # noqa: F401
from .transformer import MultiheadAttention, TransformerEncoderLayer, TransformerEncoder  # noqa: F401
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: F401
from .pooling import MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool1d, AdaptiveAvgPool2d  # noqa: F401
from .pooling import MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d  # noqa: F401,E501
from .batchnorm import BatchNorm1d, BatchNorm2d, GroupNorm  # noqa: F401
from .instancenorm import InstanceNorm1d, InstanceNorm2d  # noqa: F401
from .upsampling import Upsample, UpsamplingNearest2d, UpsamplingBilinear2d  # noqa: F401
from .fold import Fold, Unfold  # noqa: F401
from .rnn import RNNCellBase, RNNCell, LSTMCell, GRUCell, RNNBase, RNN, LSTM, GRU  # noqa: F401
# the less common layers (losses, activations, padding, shuffles, unpooling, decoder, lazy, bags)
from .activation import PReLU, RReLU, Hardshrink, Softshrink, Tanhshrink, Softmax2d  # noqa: F401,E402
from .padding import *  # noqa: F401,F403,E402
from .pixelshuffle import PixelShuffle, PixelUnshuffle, ChannelShuffle  # noqa: F401,E402
from .pooling import MaxUnpool1d, MaxUnpool2d, LPPool1d, LPPool2d  # noqa: F401,E402
from .transformer import TransformerDecoderLayer, TransformerDecoder, Transformer  # noqa: F401,E402
from .linear import LazyLinear  # noqa: F401,E402
from .lazy import LazyModuleMixin  # noqa: F401,E402
from .sparse import EmbeddingBag  # noqa: F401,E402
from .batchnorm import BatchNorm3d  # noqa: F401,E402
from .instancenorm import InstanceNorm3d  # noqa: F401,E402
from .normalization import LocalResponseNorm  # noqa: F401,E402
from .dropout import Dropout3d, AlphaDropout, FeatureAlphaDropout  # noqa: F401,E402
