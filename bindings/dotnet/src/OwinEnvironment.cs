using System;
using System.Collections;
using System.Collections.Generic;

namespace Ember
{
    /// <summary>
    /// The OWIN environment of one request: a dictionary in which one key's value is made on
    /// first access (as Katana's OwinHttpListener does with its CallEnvironment). Here it is
    /// owin.CallCancelled: its token needs the engine's abort notice, which costs an engine
    /// registration and a callback per request, so only requests whose application looks at it
    /// pay for it.
    /// </summary>
    internal sealed class OwinEnvironment : IDictionary<string, object>
    {
        readonly Dictionary<string, object> _d;
        readonly string _lazyKey;
        Func<object> _make;   // null once made (or replaced by the application)

        internal OwinEnvironment(int capacity, string lazyKey, Func<object> make)
        {
            _d = new Dictionary<string, object>(capacity, StringComparer.Ordinal);
            _lazyKey = lazyKey;
            _make = make;
        }

        void Make()
        {
            Func<object> make = _make;
            if (make == null) return;
            _make = null;
            _d[_lazyKey] = make();
        }

        bool IsLazy(string key) { return _make != null && key == _lazyKey; }

        public object this[string key]
        {
            get
            {
                if (IsLazy(key)) Make();
                return _d[key];
            }
            set
            {
                if (IsLazy(key)) _make = null;
                _d[key] = value;
            }
        }

        public bool TryGetValue(string key, out object value)
        {
            if (IsLazy(key)) Make();
            return _d.TryGetValue(key, out value);
        }

        public bool ContainsKey(string key) { return IsLazy(key) || _d.ContainsKey(key); }

        public void Add(string key, object value)
        {
            if (key == null) throw new ArgumentNullException("key");
            if (IsLazy(key)) throw new ArgumentException("an element with the key '" + key + "' already exists");
            _d.Add(key, value);
        }

        public bool Remove(string key)
        {
            if (IsLazy(key)) { _make = null; return true; }
            return _d.Remove(key);
        }

        public ICollection<string> Keys { get { Make(); return _d.Keys; } }
        public ICollection<object> Values { get { Make(); return _d.Values; } }
        public int Count { get { return _d.Count + (_make != null ? 1 : 0); } }
        public bool IsReadOnly { get { return false; } }

        public void Add(KeyValuePair<string, object> item) { Add(item.Key, item.Value); }

        public void Clear()
        {
            _make = null;
            _d.Clear();
        }

        public bool Contains(KeyValuePair<string, object> item)
        {
            if (IsLazy(item.Key)) Make();
            return ((ICollection<KeyValuePair<string, object>>)_d).Contains(item);
        }

        public void CopyTo(KeyValuePair<string, object>[] array, int arrayIndex)
        {
            Make();
            ((ICollection<KeyValuePair<string, object>>)_d).CopyTo(array, arrayIndex);
        }

        public bool Remove(KeyValuePair<string, object> item)
        {
            if (IsLazy(item.Key)) Make();
            return ((ICollection<KeyValuePair<string, object>>)_d).Remove(item);
        }

        public IEnumerator<KeyValuePair<string, object>> GetEnumerator()
        {
            Make();
            return _d.GetEnumerator();
        }

        IEnumerator IEnumerable.GetEnumerator() { return GetEnumerator(); }
    }
}
