using System;
using Ember.Interop;

namespace Ember
{
    /// <summary>What a received WebSocket message is.</summary>
    public enum EmberWebSocketMessageType
    {
        Text = NativeMethods.EMBER_WS_TEXT,
        Binary = NativeMethods.EMBER_WS_BINARY,
        /// <summary>The connection ended (see <see cref="EmberWebSocket.CloseStatus"/>); nothing follows.</summary>
        Close = 8,
    }

    /// <summary>Where a WebSocket connection is.</summary>
    public enum EmberWebSocketState
    {
        /// <summary>Accepted: messages flow both ways.</summary>
        Open,
        /// <summary>This side started the closing handshake (CloseAsync); waiting for the peer.</summary>
        CloseSent,
        /// <summary>Ended (close handshake done, connection dropped, or server stopped).</summary>
        Closed,
    }

    /// <summary>One whole WebSocket message (fragments are reassembled by the engine).</summary>
    public sealed class EmberWebSocketMessage
    {
        string _text;

        internal EmberWebSocketMessage(EmberWebSocketMessageType type, byte[] data)
        {
            Type = type;
            Data = data;
        }

        public EmberWebSocketMessageType Type { get; private set; }

        /// <summary>The payload (UTF-8 for text, checked by the engine); empty for Close.</summary>
        public byte[] Data { get; private set; }

        /// <summary>The payload decoded as UTF-8 (for text messages; binary ones decode too).</summary>
        public string Text { get { return _text ?? (_text = Utf8.Encoding.GetString(Data)); } }

        public bool IsClose { get { return Type == EmberWebSocketMessageType.Close; } }

        internal static readonly EmberWebSocketMessage Closed = new EmberWebSocketMessage(EmberWebSocketMessageType.Close, Utf8.Empty);
    }
}
